"""Follow one command-line value through the toolkit: every place in the code that hands it to another module.

`entries(run, needle)` runs `run()` under `sys.setprofile` and records each call into a toolkit module (or
build.py) that comes from a different module and takes the value among its arguments: as a string (or a path)
holding `needle`, inside a tuple, list or dict of them, or inside the frozen `BuildRequest`. A plan or a variant
holding the value does not count: from there on the value is the plan's, and the stages that read the plan take
it as theirs. `toolkit/steps/` counts as one module (a step kind and its shared base are one unit).

What comes back maps each module to the places (caller module, caller function) it was entered from with the
value, in the order first seen: a module entered from two places is one the value returns to.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path, PurePath

ROOT = Path(__file__).resolve().parent.parent
CARRIERS = ("BuildRequest",)  # the one object besides plain containers that carries a raw command-line value


def holds(obj, needle: str, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(obj, str):
        return needle in obj
    if isinstance(obj, PurePath):
        return needle in str(obj)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(holds(x, needle, depth + 1) for x in list(obj)[:200])
    if isinstance(obj, dict):
        return any(holds(k, needle, depth + 1) or holds(v, needle, depth + 1) for k, v in list(obj.items())[:200])
    if dataclasses.is_dataclass(obj) and type(obj).__name__ in CARRIERS:
        return any(holds(getattr(obj, f.name, None), needle, depth + 1) for f in dataclasses.fields(obj))
    return False


def unit_of(code) -> str | None:
    """The module a code object belongs to, as a path from the checkout's root; None outside the toolkit."""
    return _unit(code.co_filename)


@functools.cache
def _unit(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if rel.parts[:2] == ("toolkit", "steps"):
        return "toolkit/steps/"
    if rel.parts[0] == "toolkit" or rel.as_posix() == "build.py":
        return rel.as_posix()
    return None


def entries(run, needle: str) -> dict:
    """{module: [(caller module, caller function), ...]} for every entry of the value, in the order first seen."""
    seen: dict = {}

    def profile(frame, event, arg):
        if event != "call":
            return
        unit = unit_of(frame.f_code)
        caller = frame.f_back
        from_unit = unit_of(caller.f_code) if caller is not None else None
        if unit is None or from_unit == unit or not holds(dict(frame.f_locals), needle):
            return
        place = (from_unit, caller.f_code.co_name if caller is not None else None)
        places = seen.setdefault(unit, [])
        if place not in places:
            places.append(place)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen
