"""`build.py lock` for whole families: read each family's spec and lock, call each kind of source's module in turn
(toolkit/lock/git_sources.py, toolkit/lock/artifacts.py, toolkit/lock/pip_lock.py, toolkit/lock/pip_closure.py),
gather their table rows, and hand back the new locks for build.py's `cmd_lock` to write.

    build.py lock [--family F]... [--update [NAME]]... [--pin NAME=COMMIT]... [--from-release-lock FILE]
    build.py lock --check [--family F]...

`lock` brings the lock in line with the spec: a new or changed policy is resolved, an entry whose policy is
unchanged is kept (a branch does not move by itself), an entry the spec no longer declares is dropped.
`--update NAME` re-resolves NAME even so (a branch moves to its head now); `--update` alone re-resolves all.
`--pin` and `--from-release-lock` name git commits: git_sources.py reads them. Every remote answer is gathered
before anything is written; one failure and the lock stays byte-identical. `--check` resolves everything now,
writes nothing, prints `source | locked | upstream now | moved?`, and exits 1 when something moved, 0 when not.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolkit.errors import UsageError, short
from toolkit.lock import artifacts as artifact_sources
from toolkit.lock import file as lock_file
from toolkit.lock import git_sources, pip_closure, pip_lock
from toolkit.lock.pip_closure import Trees
from toolkit.lock.policy import ALL, policies
from toolkit.spec.catalog import IMAGES_DIR, path_label, read_family


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


def raise_first(errors: list, what: str) -> None:
    """One line for every failure: the worst exit code wins (bad input 2 over unreachable 3), the first is named."""
    if not errors:
        return
    errors.sort(key=lambda e: (e[1].exit_code != 2,))
    name, err = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    raise type(err)(f"{what}: {name}: {err}{more}")


def _gpu_variants(path: Path, lock: dict | None = None) -> list:
    """The family's variants whose base a registry holds (the GPU images): the ones whose pip pins are locked. A
    family that makes its base locally (or installs from a wheelhouse) has none."""
    from toolkit.spec.catalog import load_family

    raw, _ = read_family(path)
    if raw.get("base_build") or raw.get("wheelhouse"):
        return []
    from toolkit.lock.pip_index import is_gpu

    return [v for v in load_family(path, lock).values() if is_gpu(v)]


def _opened(path: Path) -> tuple:
    """What `lock` and `--check` of one family start from: (family, spec label, git policies, artifact policies,
    where each git policy is declared, lock path, its label, the lock as it stands or an empty one)."""
    raw, file = read_family(path)
    family = raw["family"]
    git, artifacts, where = policies(raw, file)
    lpath = lock_file.lock_path(path)
    label = path_label(lpath)
    old = lock_file.load(lpath, label, family) or lock_file.empty(family)
    return family, file, git, artifacts, where, lpath, label, old


def lock_family(path: Path, update=(), pins=None, release=None, release_label="", trees=None) -> tuple:
    """Resolve one family's lock, writing nothing: (table rows, the new lock, its path, its label). Git sources and
    artifacts first (every failure of either is raised together), then, for a GPU family, its pins and closures."""
    family, file, git, artifacts, where, lpath, label, old = _opened(path)
    pins = dict(pins or {})
    for name in [*pins, *(u for u in update if u != ALL)]:
        if name not in git and name not in artifacts:
            raise UsageError(
                f"{family}: {short(name)} is not a tracked source ({', '.join([*git, *artifacts]) or 'none'})"
            )
    new = lock_file.empty(family)
    new["sources"], rows, errors = git_sources.lock(
        family, git, old["sources"], update, pins, release, release_label, file, where
    )
    new["artifacts"], artifact_rows, artifact_errors = artifact_sources.lock(
        family, artifacts, old["artifacts"], update
    )
    raise_first(errors + artifact_errors, f"lock {family}")
    rows += artifact_rows
    variants = _gpu_variants(path, new)
    if variants:
        new["pip"], pip_rows = pip_lock.lock(family, variants, old.get("pip"), ALL in update)
        new["closure"], closure_rows = pip_closure.lock(
            family, variants, new["pip"], old.get("closure"), ALL in update, trees or Trees()
        )
        rows += pip_rows + closure_rows
    return rows, new, lpath, label


def check_family(path: Path, trees=None) -> tuple:
    """Resolve everything now, write nothing: (table rows, anything moved?, [(name, error)]). Artifacts, git
    sources, then, for a GPU family, its pins and closures."""
    family, _, git, artifacts, _, _, label, lock = _opened(path)
    rows, moved, errors = artifact_sources.check(family, artifacts, lock, label)
    parts = [git_sources.check(family, git, lock["sources"])]
    variants = _gpu_variants(path)
    if variants:
        pip_now, pip_rows, pip_moved, pip_errors = pip_lock.check(family, variants, lock.get("pip"))
        parts.append((pip_rows, pip_moved, pip_errors))
        parts.append(pip_closure.check(family, variants, pip_now, lock.get("closure"), trees or Trees()))
    for r, m, e in parts:
        rows, moved, errors = rows + r, moved or m, errors + e
    return rows, moved, errors


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
