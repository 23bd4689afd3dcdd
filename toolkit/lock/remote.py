"""Asking remotes what a policy means now: `git ls-remote` for refs, streamed HTTP downloads for artifacts, and the
GitHub releases API for a release tag's assets. Nothing is cached: every answer comes from the remote itself.

Failures are one line naming what was asked. A remote that says the thing does not exist (no such repository,
branch or tag; HTTP 404) is bad input, exit 2: the spec names something that is not there. A remote that cannot be
used (unreachable, timed out, a truncated download, bytes that do not match the size or digest the remote itself
declared) is exit 3: nothing about the spec is known to be wrong.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from toolkit import json_input
from toolkit.errors import ToolkitError, UsageError, short

GIT_TIMEOUT = 120
HTTP_TIMEOUT = 60
CHUNK = 1 << 20
MAX_API_BYTES = 16 << 20  # one page of 100 assets is about 100 KB
DEFAULT_API = "https://api.github.com"
WORKERS = 4  # remote calls at once
NOT_FOUND_HINTS = ("not found", "could not read username", "does not appear to be a git repository")


class RemoteUnavailable(ToolkitError):
    """A remote could not be used: unreachable, timed out, or it served something inconsistent."""

    exit_code = 3


class RemoteUnreachable(RemoteUnavailable):
    """The remote's host did not answer at all (no connection): nothing was served, so nothing is inconsistent."""


class RemoteNotFound(UsageError):
    """The remote answered: what the spec names does not exist there."""


def _git_env() -> dict:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/true", LC_ALL="C")
    env.pop("GIT_DIR", None)
    return env


def ls_remote(url: str, patterns: list) -> dict:
    """{ref name: commit} for the refs of `url` matching `patterns` (exact names)."""
    cmd = ["git", "-c", "credential.helper=", "-c", "http.lowSpeedLimit=1", "-c", "http.lowSpeedTime=30"]
    cmd += ["ls-remote", "--", url, *patterns]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=GIT_TIMEOUT, env=_git_env())
    except subprocess.TimeoutExpired:
        raise RemoteUnavailable(f"git ls-remote {url}: no answer within {GIT_TIMEOUT} s") from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        cls = RemoteNotFound if any(h in last.lower() for h in NOT_FOUND_HINTS) else RemoteUnavailable
        raise cls(f"git ls-remote {url}: {short(last, 200, quote=False)}")
    refs = {}
    for line in run.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref in patterns:
            refs[ref] = sha
    return refs


def resolve_ref(url: str, kind: str, name: str) -> str:
    """The commit a branch head or a tag (peeled: an annotated tag's commit) names now."""
    if kind == "branch":
        full = name if name.startswith("refs/") else f"refs/heads/{name}"
        refs = ls_remote(url, [full])
    else:
        full = f"refs/tags/{name}"
        refs = ls_remote(url, [full, full + "^{}"])
    commit = refs.get(full + "^{}") or refs.get(full)
    if not commit:
        raise RemoteNotFound(f"git ls-remote {url}: no {kind} {name!r} there")
    return commit


@dataclass(frozen=True)
class Fetched:
    size: int
    sha256: str


def _open(url: str, headers=None):
    req = urllib.request.Request(url, headers={"User-Agent": "miles-image-toolkit", **(headers or {})})
    try:
        return urllib.request.urlopen(req, timeout=HTTP_TIMEOUT)
    except urllib.error.HTTPError as e:
        if e.code in (404, 410):
            raise RemoteNotFound(f"{url}: HTTP {e.code} (no such file)") from None
        raise RemoteUnavailable(f"{url}: HTTP {e.code} {short(e.reason, 80, quote=False)}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise RemoteUnreachable(f"{url}: {short(str(reason), 160, quote=False)}") from None


def fetch(url: str, size: int | None = None, sha256: str | None = None) -> Fetched:
    """Download `url` once, streamed through sha256 (never held in memory or kept on disk); verify the length the
    server announced, and the size and digest the caller expects when it knows them."""
    h, n = hashlib.sha256(), 0
    with _open(url) as resp:
        announced = resp.headers.get("Content-Length")
        try:
            for chunk in iter(lambda: resp.read(CHUNK), b""):
                h.update(chunk)
                n += len(chunk)
        except (OSError, ValueError) as e:  # IncompleteRead, a reset connection
            raise RemoteUnavailable(f"{url}: download broke off after {n} bytes ({type(e).__name__})") from None
    if announced is not None and announced.isdigit() and int(announced) != n:
        raise RemoteUnavailable(f"{url}: truncated download: {n} of {announced} bytes")
    if size is not None and size != n:
        raise RemoteUnavailable(f"{url}: {n} bytes, the release lists {size}")
    digest = h.hexdigest()
    if sha256 is not None and sha256 != digest:
        raise RemoteUnavailable(f"{url}: digest mismatch: sha256 {digest}, the release lists {sha256}")
    return Fetched(n, digest)


def api_base() -> str:
    """The GitHub API: $GITHUB_API_URL (set by GitHub Actions, and by tests to a local server) or api.github.com."""
    return os.environ.get("GITHUB_API_URL", DEFAULT_API).rstrip("/")


def _api_json(url: str):
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    token = os.environ.get("GITHUB_TOKEN")
    if token and url.startswith(api_base() + "/"):  # the token goes to the API host only, never to a download
        headers["Authorization"] = f"Bearer {token}"
    with _open(url, headers) as resp:
        try:
            return json_input.parse(json_input.read_capped(resp, MAX_API_BYTES))
        except json_input.BadJson as e:
            raise RemoteUnavailable(f"{url}: not a usable JSON answer ({e})") from None
        except OSError as e:
            raise RemoteUnavailable(f"{url}: the answer broke off ({type(e).__name__})") from None


@dataclass(frozen=True)
class Asset:
    name: str
    url: str
    size: int
    updated: str
    sha256: str | None  # the digest the API declares, when it declares one


def asset_problem(a) -> str | None:
    """Why one entry of a releases-API asset list cannot be used, or None: the schema is checked before use."""
    if not isinstance(a, dict):
        return f"an asset that is not an object: {short(a)}"
    for key in ("name", "browser_download_url"):
        if not isinstance(a.get(key), str):
            return f"an asset whose {key} is not text: {short(a.get(key))}"
    size = a.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"asset {short(a['name'])}: size is not a byte count: {short(size)}"
    digest = a.get("digest")
    if digest is not None and not isinstance(digest, str):
        return f"asset {short(a['name'])}: digest is not text: {short(digest)}"
    if not isinstance(a.get("updated_at", ""), (str, type(None))):
        return f"asset {short(a['name'])}: updated_at is not text"
    return None


def release_assets(repo: str, tag: str) -> list:
    """Every asset of release `tag` of `repo`, through the releases API (paged, 100 a page)."""
    base = f"{api_base()}/repos/{repo}"
    release = _api_json(f"{base}/releases/tags/{urllib.parse.quote(tag, safe='')}")
    if not isinstance(release, dict) or not isinstance(release.get("id"), int):
        raise RemoteUnavailable(f"{base}/releases/tags/{tag}: not a release object")
    out, page = [], 1
    while True:
        batch = _api_json(f"{base}/releases/{release['id']}/assets?per_page=100&page={page}")
        if not isinstance(batch, list):
            raise RemoteUnavailable(f"{base}/releases/{release['id']}/assets: not a list")
        for a in batch:
            problem = asset_problem(a)
            if problem:
                raise RemoteUnavailable(f"{base}/releases/{release['id']}/assets: {problem}")
            digest = a.get("digest") or ""
            out.append(
                Asset(
                    name=a["name"],
                    url=a["browser_download_url"],
                    size=a["size"],
                    updated=str(a.get("updated_at") or ""),
                    sha256=digest.removeprefix("sha256:") if digest.startswith("sha256:") else None,
                )
            )
        if len(batch) < 100:
            return sorted(out, key=lambda x: x.name)
        page += 1


def run_all(tasks: dict) -> dict:
    """{key: fn} run in a small pool -> {key: result or the ToolkitError it raised}."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {k: pool.submit(fn) for k, fn in tasks.items()}
    out = {}
    for k, f in futures.items():
        try:
            out[k] = f.result()
        except ToolkitError as e:
            out[k] = e
    return out


def check_all(family: str, tasks: dict, locked: dict, show) -> tuple:
    """Run `lock --check`'s {name: fn -> (upstream now, moved?)} in one pool: (table rows by name, anything moved?,
    [(family/name, error)]). A failed one's row says unreachable (exit 3) or not found."""
    rows, moved, errors = [], False, []
    for name, value in sorted(run_all(tasks).items()):
        if isinstance(value, ToolkitError):
            errors.append((f"{family}/{name}", value))
            now, flag = ("unreachable" if value.exit_code == 3 else "not found"), "?"
        else:
            now, flag = value
            moved = moved or flag.startswith("yes")
        rows.append([f"{family}/{name}", show(locked.get(name)), now, flag])
    return rows, moved, errors
