"""The lock file of a family, `images/<family>.lock.json`: what every policy resolved to, in one JSON format.

The spec says what to follow (a branch, a tag, a commit; an artifact URL or a release's assets) and why; the lock
says what that was when someone last ran `build.py lock`: the exact commit of each git source and the size and
sha256 of each artifact, and the file each exact pip pin of a GPU variant resolved to (toolkit/lock/pip_lock.py).
Builds read pins only from here. The format is versioned (`schema`), written with sorted
keys and a final newline, so the same pins are the same bytes and a change is a readable diff. A file is replaced
only whole: written to a temporary file beside it and renamed over it, so a failed or interrupted `lock` leaves the
old one byte-identical.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from toolkit import json_input
from toolkit.errors import SpecError, short
from toolkit.plan.artifacts import file_name_problem, url_problem
from toolkit.spec.values import COMMIT_RE

SCHEMA = 1
SUFFIX = ".lock.json"
MAX_LOCK_BYTES = 1 << 20
SHA256_RE = re.compile(r"[0-9a-f]{64}")
TRACK_KINDS = ("branch", "tag", "commit")


def lock_path(spec_path: Path) -> Path:
    """`images/rocm.yaml` -> `images/rocm.lock.json`."""
    return Path(spec_path).with_name(Path(spec_path).stem + SUFFIX)


def empty(family: str) -> dict:
    return {"schema": SCHEMA, "family": family, "sources": {}, "artifacts": {}}


def changed(before, now) -> str:
    """The `changed?` cell of `build.py lock`'s table for one entry: no, yes, or dropped."""
    return "no" if before == now else ("dropped" if now is None else "yes")


def rows(prefix: str, before: dict | None, now: dict, show) -> list[list]:
    """`build.py lock`'s table rows of one section, one per name either side holds: `PREFIX/NAME | before | now |
    changed?`, each entry shown by the section's own `show`."""
    before = before or {}
    return [
        [f"{prefix}/{name}", show(before.get(name)), show(now.get(name)), changed(before.get(name), now.get(name))]
        for name in sorted(set(before) | set(now))
    ]


def dumps(lock: dict) -> str:
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"


def write(path: Path, lock: dict) -> bool:
    """Replace `path` with `lock` (temp file + rename); False, and nothing touched, when the bytes are the same."""
    text = dumps(lock)
    if path.is_file() and path.read_text() == text:
        return False
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def _need(cond: bool, label: str, key: str, problem: str) -> None:
    if not cond:
        raise SpecError(label, key, problem)


def _check_record(rec, label: str, key: str) -> None:
    """A locked file: its URL, sha256 and size (a lock holds no pending artifact: one nobody locked is absent)."""
    _need(isinstance(rec, dict), label, key, "expected a mapping")
    _need("pending" not in rec, label, f"{key}.pending", "a lock holds only locked files (leave a pending one out)")
    problem = url_problem(rec.get("url"))
    _need(problem is None, label, f"{key}.url", str(problem))
    _need(SHA256_RE.fullmatch(str(rec.get("sha256", ""))) is not None, label, f"{key}.sha256", "not a sha256 hex")
    size = rec.get("size")  # null: the digest was taken from a published record, the file not yet downloaded
    ok = size is None or (isinstance(size, int) and not isinstance(size, bool) and size >= 0)
    _need(ok, label, f"{key}.size", "not a size")


def check(lock, label: str, family: str) -> dict:
    """Validate a parsed lock (SpecError naming the lock file and key); return it."""
    _need(isinstance(lock, dict), label, "", "not a lock file (a JSON object)")
    _need(
        lock.get("schema") == SCHEMA,
        label,
        "schema",
        f"schema {short(lock.get('schema'))}; this toolkit reads schema {SCHEMA}",
    )
    _need(lock.get("family") == family, label, "family", f"is {short(lock.get('family'))}, expected {family!r}")
    extra = set(lock) - {"schema", "family", "sources", "artifacts", "pip", "closure"}
    _need(not extra, label, short(sorted(extra)[0] if extra else "", quote=False), "unknown key")
    for section in ("sources", "artifacts"):
        _need(isinstance(lock.get(section, {}), dict), label, section, "expected a mapping of names")
    for name, entry in (lock.get("sources") or {}).items():
        key = f"sources.{name}"
        _need(isinstance(entry, dict), label, key, "expected a mapping")
        _need(isinstance(entry.get("git"), str), label, f"{key}.git", "missing")
        _need(COMMIT_RE.fullmatch(str(entry.get("commit", ""))) is not None, label, f"{key}.commit", "not a commit")
        policy = entry.get("policy")
        _need(
            bool(
                isinstance(policy, dict)
                and policy
                and set(policy) <= set(TRACK_KINDS)
                and all(isinstance(v, str) and v for v in policy.values())
            ),
            label,
            f"{key}.policy",
            "bad",
        )
        _need(isinstance(entry.get("via"), str), label, f"{key}.via", "missing")
    for name, entry in (lock.get("artifacts") or {}).items():
        key = f"artifacts.{name}"
        _need(isinstance(entry, dict) and isinstance(entry.get("policy"), dict), label, key, "no policy")
        if "assets" in entry:
            _need(isinstance(entry["assets"], dict), label, f"{key}.assets", "expected a mapping")
            for asset, rec in entry["assets"].items():
                _need(file_name_problem(asset) is None, label, f"{key}.assets", str(file_name_problem(asset)))
                _check_record(rec, label, f"{key}.assets.{asset}")
        else:
            _check_record(entry, label, key)
    if "pip" in lock:
        from toolkit.lock.pip_lock import check_section

        check_section(lock["pip"], label)
    if "closure" in lock:
        from toolkit.lock import pip_closure

        pip_closure.check_section(lock["closure"], label)
    lock.setdefault("sources", {})
    lock.setdefault("artifacts", {})
    return lock


def load(path: Path, label: str, family: str) -> dict | None:
    """The validated lock at `path` (at most MAX_LOCK_BYTES, json_input's depth and number caps), or None when
    there is none."""
    try:
        data = json_input.load_file(path, MAX_LOCK_BYTES)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SpecError(label, "", f"cannot read: {e.strerror}") from None
    except json_input.BadJson as e:
        raise SpecError(label, "", str(e)) from None
    return check(data, label, family)
