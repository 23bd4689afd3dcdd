"""The `pip` section of a family's lock: the file each exact pip pin resolved to, per Python and platform.

As pip-tools and uv record a resolve, `build.py lock` records, for every exact pin a GPU variant's steps install
(toolkit/lock/pip_index.py), the file its index holds for the base's Python on each platform the family builds: name,
sha256, wheel or sdist, and the index it came from (`default`, or the extra index's URL), with the exact pins its
extras bring (`brings`). Variants that share a pin, Python and platform share its record. A record, once locked, is
kept until `lock --update` (a released file does not change by itself); a pin whose index could not be reached is
`pending` (its step still installs it by name and version), and `lock --check` reports a pin whose file
disappeared or changed since. `lock` and `check` are the two entries a family's lock calls, once each.

    "pip": {"flash-attn==2.8.3": {"py3.12 linux/amd64": {"file": "flash_attn-2.8.3.tar.gz", "sha256": "...",
                                                          "kind": "sdist", "index": "default"}}, ...}
"""

from __future__ import annotations

from toolkit.errors import SpecError, UsageError
from toolkit.lock import file as lock_file
from toolkit.lock import pip_index

KINDS = ("wheel", "sdist")
PENDING = {"pending": "its index could not be reached"}


def _record(found) -> dict:
    return {"file": found.file, "sha256": found.sha256, "kind": found.kind, "index": found.index}


def resolve(variants, old: dict | None = None, update: bool = False) -> tuple[dict, list]:
    """(the family's pip section, problems): a locked record is kept unless `update`; the rest is asked of the
    index (only for the variants that need it)."""
    old = old or {}
    section: dict = {}
    problems: list = []
    default, extra = None, dict[str, pip_index.Index]()
    for v in variants:
        base = pip_index.bases.load_base(v.base)
        uses = pip_index.pin_uses(v)
        places = [f"py{base.python_version} {p}" for p in v.platforms]
        keys = [f"{u.name}=={u.version}" for u in uses]
        kept = {k: w for k in keys for w in places if "file" in ((old.get(k) or {}).get(w) or {})}
        if not update and len(kept) == len(keys) * len(places):
            for k in keys:
                section.setdefault(k, {}).update({w: old[k][w] for w in places})
            continue
        default = default or pip_index.host_index()
        for report in pip_index.check_variant(v, default, extra, base):
            where = f"py{report.python} {report.platform}"
            problems += report.problems
            for use in uses:
                key = f"{use.name}=={use.version}"
                found = report.found.get((use.step, use.name))
                if (use.step, use.name) in report.failed:
                    section.setdefault(key, {})[where] = {"missing": report.failed[(use.step, use.name)]}
                    continue
                if found is None:
                    prev = (old.get(key) or {}).get(where)
                    section.setdefault(key, {}).setdefault(where, prev if prev and "file" in prev else dict(PENDING))
                    continue
                rec = _record(found)
                brings = {
                    f"{name}=={f.version}": _record(f)
                    for (step, name), f in report.found.items()
                    if step == use.step and f.via == key
                }
                if brings:
                    rec["brings"] = dict(sorted(brings.items()))
                section.setdefault(key, {})[where] = rec
    return {k: dict(sorted(v.items())) for k, v in sorted(section.items())}, problems


def show(records: dict | None) -> str:
    """A pin's records in a table cell: each place's kind and digest, or pending."""
    if not records:
        return "-"
    parts = []
    for where, rec in sorted(records.items()):
        state = "missing" if "missing" in rec else "pending"
        parts.append(f"{where}: {state}" if "file" not in rec else f"{where}: {rec['kind']} {rec['sha256'][:12]}")
    return "; ".join(parts)


def _check_record(rec, label: str, key: str) -> None:
    if not isinstance(rec, dict):
        raise SpecError(label, key, "expected a record")
    if "pending" in rec:  # exactly what `lock` writes for a pin it could not resolve: no digest, no file
        if rec != {"pending": rec["pending"]} or not isinstance(rec["pending"], str) or not rec["pending"].strip():
            raise SpecError(label, key, 'a pending record is {"pending": REASON} alone (no file, digest or kind)')
        return
    if rec.get("kind") not in KINDS or not isinstance(rec.get("file"), str):
        raise SpecError(label, key, "needs file and kind (wheel or sdist)")
    sha = rec.get("sha256")
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        raise SpecError(label, f"{key}.sha256", "not a sha256 hex")
    if not isinstance(rec.get("index"), str):
        raise SpecError(label, f"{key}.index", "missing")
    brings = rec.get("brings", {})
    if not isinstance(brings, dict):
        raise SpecError(label, f"{key}.brings", "expected a mapping of pins")
    for pin, sub in brings.items():
        _check_record(sub, label, f"{key}.brings.{pin}")


def check_section(section, label: str) -> None:
    """Refuse a hand-edited section that is not what `lock` writes (SpecError naming the lock file and key)."""
    if not isinstance(section, dict):
        raise SpecError(label, "pip", "expected a mapping of pins")
    for pin, places in section.items():
        if not isinstance(pin, str) or "==" not in pin or not isinstance(places, dict):
            raise SpecError(label, f"pip.{pin}", "expected NAME==VERSION: {PYTHON PLATFORM: record}")
        for where, rec in places.items():
            _check_record(rec, label, f"pip.{pin}.{where}")


def _files(rec: dict) -> set:
    out = {(rec["file"], rec["sha256"])} if "file" in rec else set()
    for sub in (rec.get("brings") or {}).values():
        out |= _files(sub)
    return out


def compare(locked: dict, now: dict) -> list[list]:
    """`lock --check` rows, one per pin: locked | now | moved? (a file gone or changed is moved)."""
    rows = []
    for pin in sorted(set(locked) | set(now)):
        before, after = locked.get(pin) or {}, now.get(pin) or {}
        moved = "no"
        for where in sorted(set(before) | set(after)):
            b, a = before.get(where), after.get(where)
            if b is None:
                moved = "yes (not locked)"
            elif a is None:
                moved = "yes (no longer installed)"
            elif "missing" in a:
                moved = f"yes (gone: {a['missing']})"
            elif "file" not in b or "file" not in a:
                moved = "pending" if moved == "no" else moved
            elif _files(b) != _files(a):
                moved = "yes"
        rows.append([f"pip/{pin}", show(before), show(after), moved])
    return rows


def lock(family: str, variants, old: dict | None, update: bool) -> tuple[dict, list]:
    """`build.py lock` of a family's pins, writing nothing: (the new `pip` section, table rows). A problem the index
    reports (a pin it does not hold for a place) is a UsageError naming the first."""
    section, problems = resolve(variants, old, update=update)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"lock {family}: pip pin: {problems[0]}{more}")
    return section, lock_file.rows(f"{family}/pip", old, section, show)


def check(family: str, variants, locked: dict | None) -> tuple:
    """`build.py lock --check` of a family's pins, writing nothing: (the pins resolved now, table rows, anything
    moved?, [(name, error)])."""
    now, problems = resolve(variants, None, update=True)
    rows = compare(locked or {}, now)
    for row in rows:
        row[0] = f"{family}/{row[0]}"
    moved = any(row[3].startswith("yes") for row in rows)
    return now, rows, moved, [(f"{family}/pip", UsageError(p)) for p in problems]
