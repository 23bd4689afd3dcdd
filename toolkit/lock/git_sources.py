"""Git components in a family's lock (its `sources` section): resolve each tracked component's policy to a commit,
check it against its remote now, and record it.

A fixed commit needs no remote; a branch or tag is asked of the remote with `git ls-remote`. `--pin NAME=COMMIT`
(`parse_pins`) records a commit without asking, and `--from-release-lock FILE` (`parse_release_lock`) takes the
sglang and Megatron-LM commits of upstream's `release-lock.json` for the components whose repository it names.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolkit import json_input
from toolkit.errors import ToolkitError, UsageError, short
from toolkit.lock import file as lock_file
from toolkit.lock import remote
from toolkit.lock.policy import ALL, GitPolicy
from toolkit.spec.refnames import ref_name_problem
from toolkit.spec.values import COMMIT_RE

RELEASE_LOCK_SOURCES = ("sglang", "megatron")  # upstream's release-lock.json: <prefix>_repo/_branch/_commit
MAX_RELEASE_LOCK_BYTES = 1 << 20  # upstream's is about 1 KB


def parse_pins(items) -> dict:
    out = {}
    for item in items:
        name, eq, commit = item.partition("=")
        if not eq or not COMMIT_RE.fullmatch(commit):
            raise UsageError(f"--pin {short(item)}: expected NAME=COMMIT (a 40-hex commit)")
        if name in out:
            raise UsageError(f"--pin {short(name)}: given twice")
        out[name] = commit
    return out


def _repo_key(url: str) -> str:
    """`https://github.com/Org/Repo.git` and `org/repo` compare equal (GitHub names are case-insensitive)."""
    path = re.sub(r"^[a-z+]+://[^/]+/", "", url.strip().lower()).rstrip("/")
    return path.removesuffix(".git")


def parse_release_lock(path: str) -> dict:
    """Upstream's release-lock.json -> {repo key: (commit, branch, key prefix)}. Values are checked as data."""
    label = short(path, 120, quote=False)
    try:
        data = json_input.load_file(path, MAX_RELEASE_LOCK_BYTES)
    except json_input.BadJson as e:
        raise UsageError(f"--from-release-lock {label}: {e}") from None
    except OSError as e:
        raise UsageError(f"--from-release-lock {label}: cannot read it ({e.strerror or type(e).__name__})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--from-release-lock {label}: not a JSON object")
    out = {}
    for prefix in RELEASE_LOCK_SOURCES:
        repo, branch, commit = (data.get(f"{prefix}_{k}") for k in ("repo", "branch", "commit"))
        if not isinstance(repo, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+", repo):
            raise UsageError(f"--from-release-lock {label}: {prefix}_repo is not OWNER/NAME: {short(repo)}")
        if not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit):
            raise UsageError(f"--from-release-lock {label}: {prefix}_commit is not a 40-hex commit: {short(commit)}")
        problem = ref_name_problem(branch)
        if problem:
            raise UsageError(f"--from-release-lock {label}: {prefix}_branch: {problem}")
        out[_repo_key(repo)] = (commit, branch, prefix)
    return out


def _release_entry(policy: GitPolicy, given: tuple, file: str, where: str, label: str) -> tuple:
    commit, branch, prefix = given
    track = policy.track
    if "tag" in track:
        raise UsageError(f"{file}: {where}: follows tag {track['tag']}; {label} records branch commits ({prefix})")
    if "branch" in track and track["branch"] != branch:
        raise UsageError(f"{file}: {where}: follows branch {track['branch']}, {label} records {prefix}_branch {branch}")
    if policy.fixed and policy.fixed != commit:
        raise UsageError(f"{file}: {where}: pins commit {policy.fixed}, {label} records {prefix}_commit {commit}")
    return commit, f"release-lock {Path(label).name}"


def show(entry) -> str:
    """A source's lock entry in a table cell: its commit, shortened."""
    return "(none)" if entry is None else entry["commit"][:12]


def _record(policy: GitPolicy, commit: str, via: str) -> dict:
    return {"git": policy.git, "policy": policy.track, "commit": commit, "via": via}


def lock(family: str, git: dict, old: dict, update=(), pins=None, release=None, release_label="", file="", where=None):
    """Resolve a family's git components, writing nothing: (the new `sources` section, table rows, [(name, error)]).
    An entry whose policy is unchanged is kept unless `update` names it (or ALL); every remote is asked in one pool.
    """
    pins, where = pins or {}, where or {}
    new: dict = {}
    tasks: dict = {}
    for name, policy in git.items():
        prev = old.get(name)
        same = prev is not None and prev["git"] == policy.git and prev["policy"] == policy.track
        given = (release or {}).get(_repo_key(policy.git))
        if name in pins:
            if policy.fixed and policy.fixed != pins[name]:
                raise UsageError(f"--pin {name}: the spec pins commit {policy.fixed} ({file}: {where[name]})")
            commit, via = pins[name], "pin"
        elif given:
            commit, via = _release_entry(policy, given, file, where[name], release_label)
        elif same and (policy.fixed or (ALL not in update and name not in update)):
            commit, via = old[name]["commit"], old[name]["via"]  # a fixed commit keeps the record of how it was locked
        elif policy.fixed:
            commit, via = policy.fixed, "spec"
        else:
            kind = "branch" if "branch" in policy.track else "tag"
            tasks[name] = lambda p=policy, k=kind: (remote.resolve_ref(p.git, k, p.track[k]), "ls-remote")
            continue
        new[name] = _record(policy, commit, via)
    errors = []
    for name, value in remote.run_all(tasks).items():
        if isinstance(value, ToolkitError):
            errors.append((name, value))
        else:
            new[name] = _record(git[name], *value)
    return new, lock_file.rows(family, old, new, show), errors


def _check_one(policy: GitPolicy, entry) -> tuple:
    """(upstream now, moved?) of one git source."""
    if policy.fixed:
        if "branch" not in policy.track:
            return policy.fixed[:12], "no (fixed)"
        head = remote.resolve_ref(policy.git, "branch", policy.track["branch"])
        return f"{policy.track['branch']} at {head[:12]}", "no (fixed)"
    kind = "branch" if "branch" in policy.track else "tag"
    now = remote.resolve_ref(policy.git, kind, policy.track[kind])
    if entry is None or entry["policy"] != policy.track or entry["git"] != policy.git:
        return now[:12], "yes (not locked)"
    return now[:12], "yes" if now != entry["commit"] else "no"


def check(family: str, git: dict, locked: dict) -> tuple:
    """Ask every remote now, write nothing: (table rows, anything moved?, [(name, error)])."""
    tasks = {n: (lambda p=p, n=n: _check_one(p, locked.get(n))) for n, p in git.items()}
    return remote.check_all(family, tasks, locked, show)
