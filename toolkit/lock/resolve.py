"""Resolve each family's policies (toolkit/lock/policy.py) into its lock (toolkit/lock/file.py): the logic of
`build.py lock`, whose options and printed tables are build.py's `cmd_lock`.

    build.py lock [--family F]... [--update [NAME]]... [--pin NAME=COMMIT]... [--from-release-lock FILE]
    build.py lock --check [--family F]...

`lock` brings the lock in line with the spec: a new or changed policy is resolved, an entry whose policy is
unchanged is kept (a branch does not move by itself), an entry the spec no longer declares is dropped.
`--update NAME` re-resolves NAME even so (a branch moves to its head now); `--update` alone re-resolves all.
A fixed commit needs no remote; `--pin NAME=COMMIT` records a commit without asking the remote (a host that cannot
reach it), and `--from-release-lock FILE` takes the sglang and Megatron-LM commits of upstream's `release-lock.json`
for the components whose repository it names. Every remote answer is gathered before anything is written; one
failure and the lock stays byte-identical. `--check` resolves everything now, writes nothing, prints
`source | locked | upstream now | moved?`, and exits 1 when something moved, 0 when not.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from toolkit import json_input
from toolkit.errors import ToolkitError, UsageError, short
from toolkit.lock import file as lock_file
from toolkit.lock import pip_closure, pip_lock, remote
from toolkit.lock.pip_closure import Trees
from toolkit.lock.policy import GitPolicy, assets_fingerprint, check_locked_urls, policies
from toolkit.plan.artifacts import file_name_problem, url_problem
from toolkit.spec.catalog import IMAGES_DIR, path_label, read_family
from toolkit.spec.refnames import ref_name_problem
from toolkit.spec.values import COMMIT_RE

ALL = "*"
RELEASE_LOCK_SOURCES = ("sglang", "megatron")  # upstream's release-lock.json: <prefix>_repo/_branch/_commit
WORKERS = 4
MAX_RELEASE_LOCK_BYTES = 1 << 20  # upstream's is about 1 KB


def families(names, images_dir: Path = IMAGES_DIR) -> list:
    """[(family, spec path)]: the ones named, or every family that declares a policy."""
    if names:
        out = []
        for name in dict.fromkeys(names):
            path = images_dir / f"{name}.yaml"
            if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name) or not path.is_file():
                known = ", ".join(p.stem for p in sorted(images_dir.glob("*.yaml")))
                raise UsageError(f"--family {short(name)}: no such family ({known})")
            out.append((name, path))
        return out
    found = []
    for path in sorted(images_dir.glob("*.yaml")):
        raw, file = read_family(path)
        git, artifacts, _ = policies(raw, file)
        if git or artifacts:
            found.append((path.stem, path))
    return found


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


def _show(entry) -> str:
    """A lock entry in a table cell: a commit or digest, shortened."""
    if entry is None:
        return "(none)"
    if "commit" in entry:
        return entry["commit"][:12]
    if "assets" in entry:
        return f"{len(entry['assets'])} assets {assets_fingerprint(entry['assets'])[:12]}"
    return f"sha256:{entry['sha256'][:12]}"


def _lock_artifact(policy) -> dict:
    if "url" in policy.policy:
        got = remote.fetch(policy.policy["url"])
        return {"policy": policy.policy, "url": policy.policy["url"], "size": got.size, "sha256": got.sha256}
    rel = policy.policy["release"]
    assets = {}
    for a in remote.release_assets(rel["repo"], rel["tag"]):
        if file_name_problem(a.name) or url_problem(a.url):
            raise remote.RemoteUnavailable(
                f"release {rel['repo']}@{rel['tag']}: asset {short(a.name)} has no plain URL"
            )
        got = remote.fetch(a.url, size=a.size, sha256=a.sha256)
        assets[a.name] = {"url": a.url, "size": got.size, "sha256": got.sha256, "updated": a.updated}
    if not assets:
        raise remote.RemoteNotFound(f"release {rel['repo']}@{rel['tag']}: no assets")
    return {"policy": policy.policy, "assets": assets}


def _run_all(tasks: dict) -> dict:
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


def raise_first(errors: list, what: str) -> None:
    """One line for every failure: the worst exit code wins (bad input 2 over unreachable 3), the first is named."""
    if not errors:
        return
    errors.sort(key=lambda e: (e[1].exit_code != 2,))
    name, err = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise type(err)(f"{what}: {name}: {err}{more}")


def lock_family(path: Path, update=(), pins=None, release=None, release_label="", trees=None) -> tuple:
    """Resolve one family's lock, writing nothing: (table rows, the new lock, its path, its label)."""
    raw, file = read_family(path)
    family = raw["family"]
    git, artifacts, where = policies(raw, file)
    lpath = lock_file.lock_path(path)
    label = path_label(lpath)
    old = lock_file.load(lpath, label, family) or lock_file.empty(family)
    for name in artifacts:  # a hand-edited URL is never carried forward: the artifact is fetched afresh
        prev = old["artifacts"].get(name)
        if prev is not None and "url" in artifacts[name].policy and prev.get("url") != artifacts[name].policy["url"]:
            update = (*update, name)
    pins = dict(pins or {})
    for name in [*pins, *(u for u in update if u != ALL)]:
        if name not in git and name not in artifacts:
            raise UsageError(
                f"{family}: {short(name)} is not a tracked source ({', '.join([*git, *artifacts]) or 'none'})"
            )
    new = lock_file.empty(family)
    tasks: dict = {}
    for name, policy in git.items():
        prev = old["sources"].get(name)
        same = prev is not None and prev["git"] == policy.git and prev["policy"] == policy.track
        given = (release or {}).get(_repo_key(policy.git))
        if name in pins:
            if policy.fixed and policy.fixed != pins[name]:
                raise UsageError(f"--pin {name}: the spec pins commit {policy.fixed} ({file}: {where[name]})")
            commit, via = pins[name], "pin"
        elif given:
            commit, via = _release_entry(policy, given, file, where[name], release_label)
        elif same and (policy.fixed or (ALL not in update and name not in update)):
            commit, via = prev["commit"], prev["via"]  # a fixed commit keeps the record of how it was locked
        elif policy.fixed:
            commit, via = policy.fixed, "spec"
        else:
            kind = "branch" if "branch" in policy.track else "tag"
            tasks[("sources", name)] = lambda p=policy, k=kind: (remote.resolve_ref(p.git, k, p.track[k]), "ls-remote")
            continue
        new["sources"][name] = {"git": policy.git, "policy": policy.track, "commit": commit, "via": via}
    for name, policy in artifacts.items():
        prev = old["artifacts"].get(name)
        if prev is not None and prev["policy"] == policy.policy and ALL not in update and name not in update:
            new["artifacts"][name] = prev
        else:
            tasks[("artifacts", name)] = lambda p=policy: _lock_artifact(p)
    results = _run_all(tasks)
    pending = {}  # an artifact never locked whose host did not answer stays pending (its step is left out)
    for key, value in list(results.items()):
        if key[0] == "artifacts" and isinstance(value, remote.RemoteUnreachable) and key[1] not in old["artifacts"]:
            pending[key[1]] = str(value)
            del results[key]
    raise_first([(k[1], v) for k, v in results.items() if isinstance(v, ToolkitError)], f"lock {family}")
    for (section, name), value in results.items():
        if section == "sources":
            p = git[name]
            new["sources"][name] = {"git": p.git, "policy": p.track, "commit": value[0], "via": value[1]}
        else:
            new["artifacts"][name] = value
    rows = []
    for section in ("sources", "artifacts"):
        for name in sorted(set(old[section]) | set(new[section]) | (set(pending) if section == "artifacts" else set())):
            before, now = old[section].get(name), new[section].get(name)
            changed = "no" if before == now else ("dropped" if now is None else "yes")
            if section == "artifacts" and name in pending:
                changed = "pending (its host did not answer)"
            rows.append([f"{family}/{name}", _show(before), _show(now), changed])
    variants = _gpu_variants(path, new)
    if variants:
        new["pip"], problems = pip_lock.resolve(variants, old.get("pip"), update=ALL in update)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UsageError(f"lock {family}: pip pin: {problems[0]}{more}")
        before_pip = old.get("pip") or {}
        for pin in sorted(set(before_pip) | set(new["pip"])):
            b, n = before_pip.get(pin), new["pip"].get(pin)
            changed = "no" if b == n else ("dropped" if n is None else "yes")
            rows.append([f"{family}/pip/{pin}", pip_lock.show(b), pip_lock.show(n), changed])
        new["closure"] = pip_closure.section(variants, new["pip"], old.get("closure"), ALL in update, trees or Trees())
        for name in sorted(set(old.get("closure") or {}) | set(new["closure"])):
            b, n = (old.get("closure") or {}).get(name), new["closure"].get(name)
            changed = "no" if b == n else ("dropped" if n is None else "yes")
            rows.append([f"{family}/closure/{name}", _show_closure(b), _show_closure(n), changed])
    return rows, new, lpath, label


def _show_closure(places: dict | None) -> str:
    if not places:
        return "-"
    return "; ".join(
        f"{where}: {len(rec['packages'])} dists {rec['inputs'][:12]}" for where, rec in sorted(places.items())
    )


def _gpu_variants(path: Path, lock: dict | None = None) -> list:
    """The family's variants whose base a registry holds (the GPU images): the ones whose pip pins are locked. A
    family that makes its base locally (or installs from a wheelhouse) has none."""
    from toolkit.spec.catalog import load_family

    raw, _ = read_family(path)
    if raw.get("base_build") or raw.get("wheelhouse"):
        return []
    from toolkit.lock.pip_index import is_gpu

    return [v for v in load_family(path, lock).values() if is_gpu(v)]


def _check_git(policy: GitPolicy, entry) -> tuple:
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


def _check_artifact(policy, entry) -> tuple:
    if entry is not None and entry["policy"] != policy.policy:
        entry = None
    if "url" in policy.policy:
        got = remote.fetch(policy.policy["url"])
        size_moved = entry is not None and entry["size"] is not None and got.size != entry["size"]
        moved = entry is None or got.sha256 != entry["sha256"] or size_moved
        return f"sha256:{got.sha256[:12]}", "yes" if moved else "no"
    rel = policy.policy["release"]
    listed = remote.release_assets(rel["repo"], rel["tag"])
    locked = (entry or {}).get("assets", {})
    moved = entry is None or sorted(locked) != [a.name for a in listed]
    for a in listed:
        rec = locked.get(a.name)
        if rec and (
            rec["size"] != a.size or rec.get("updated") != a.updated or (a.sha256 and a.sha256 != rec["sha256"])
        ):
            moved = True
    return f"{len(listed)} assets listed", "yes" if moved else "no"


def check_family(path: Path, trees=None) -> tuple:
    """Resolve everything now, write nothing: (table rows, anything moved?, [(name, error)])."""
    raw, file = read_family(path)
    family = raw["family"]
    git, artifacts, _ = policies(raw, file)
    lpath = lock_file.lock_path(path)
    lock = lock_file.load(lpath, path_label(lpath), family) or lock_file.empty(family)
    check_locked_urls(lock, artifacts, path_label(lpath))
    tasks = {("sources", n): (lambda p=p, n=n: _check_git(p, lock["sources"].get(n))) for n, p in git.items()}
    for n, p in artifacts.items():
        tasks[("artifacts", n)] = lambda p=p, n=n: _check_artifact(p, lock["artifacts"].get(n))
    results = _run_all(tasks)
    rows, moved, errors = [], False, []
    for (section, name), value in sorted(results.items()):
        if isinstance(value, ToolkitError):
            errors.append((f"{family}/{name}", value))
            now, flag = ("unreachable" if value.exit_code == 3 else "not found"), "?"
        else:
            now, flag = value
            moved = moved or flag.startswith("yes")
        rows.append([f"{family}/{name}", _show(lock[section].get(name)), now, flag])
    variants = _gpu_variants(path)
    if variants:
        now_pip, problems = pip_lock.resolve(variants, None, update=True)
        for row in pip_lock.compare(lock.get("pip") or {}, now_pip):
            row[0] = f"{family}/{row[0]}"
            rows.append(row)
            moved = moved or row[3].startswith("yes")
        errors += [(f"{family}/pip", UsageError(p)) for p in problems]
        for name, places in sorted((lock.get("closure") or {}).items()):
            v = next((v for v in variants if v.name == name), None)
            try:
                now_closure = pip_closure.section([v], now_pip, None, True, trees or Trees())[name] if v else None
            except ToolkitError as e:
                errors.append((f"{family}/closure/{name}", e))
                rows.append([f"{family}/closure/{name}", _show_closure(places), "unresolved", "?"])
                continue
            flag = "no" if now_closure and _packages(now_closure) == _packages(places) else "yes"
            moved = moved or flag == "yes"
            rows.append([f"{family}/closure/{name}", _show_closure(places), _show_closure(now_closure), flag])
    return rows, moved, errors


def _packages(places: dict) -> dict:
    """What a closure installs, per place: each distribution's version and files (not why it is there)."""
    return {w: {n: (p["version"], p["files"]) for n, p in rec["packages"].items()} for w, rec in places.items()}


def check_families(paths, trees=None) -> tuple:
    """`lock --check` of several families, writing nothing: (table rows, anything moved?, [(name, error)])."""
    rows: list = []
    errors: list = []
    moved = False
    for path in paths:
        r, m, e = check_family(path, trees)
        rows, moved, errors = rows + r, moved or m, errors + e
    return rows, moved, errors


def lock_families(paths, update=(), pins=None, release=None, release_label="", trees=None) -> tuple:
    """Resolve several families' locks, writing nothing: (table rows, [(new lock, its path, its label)]). Every
    family is resolved before any is written (one failure, no lock touched); a --pin or --update name must be a
    source some family tracks, and an artifact is never pinned."""
    pins = dict(pins or {})
    declared = {path: policies(*read_family(path)) for path in paths}
    owners = {n for git, artifacts, _ in declared.values() for n in (*git, *artifacts)}
    for option, names in (("--pin", pins), ("--update", [u for u in update if u != ALL])):
        for name in names:
            if name not in owners:
                raise UsageError(f"{option} {short(name)}: no family here tracks a source of that name")
    artifact_names = {n for _, artifacts, _ in declared.values() for n in artifacts}
    for name in pins:
        if name in artifact_names:
            raise UsageError(f"--pin {short(name)}: an artifact is pinned by its digest, which `lock` downloads")
    resolved, rows = [], []
    for path in paths:
        git, artifacts = declared[path][:2]
        mine = {n: c for n, c in pins.items() if n in git}
        theirs = [u for u in update if u == ALL or u in git or u in artifacts]
        r, new, lpath, label = lock_family(path, theirs, mine, release, release_label, trees)
        rows += r
        resolved.append((new, lpath, label))
    return rows, resolved
