"""inventory: the image's python holds only the distributions of a closed set, each at its version.

The set is the family's lock (the wheelhouse's constraints file), the bridge, and what the spec says the image
installs beside the wheelhouse; the toolkit derives it (``toolkit/spec/inventory.py``), nobody lists it by hand.
Every installed distribution the image's python sees (``importlib.metadata``, the first of each PEP 503 name on
``sys.path``, as pip sees them) is judged: one outside the set, or at another version, fails the check, named. A
version of ``null`` takes any version: a distribution built from a git component's tree, whose version the tree
says (the input hash covers the tree). A distribution of the set that is not installed is not a failure.

Config: ``{"distributions": {NAME: VERSION, ...}}``, or, for a family whose platforms install different pins,
``{"machines": {"x86_64": {NAME: VERSION, ...}, "aarch64": {...}}}``: the set of the machine the runner runs on
(``platform.machine()``). Names are PEP 503 normalized.
"""

from __future__ import annotations

import platform
from typing import Any, Dict, List, Optional

from .. import inventory
from ..result import CheckResult
from .base import Gate, config_error, short

Item = Dict[str, Any]  # {"distributions": {...}} or {"machines": {machine: {...}}}


def _set(value: Any, where: str, key: str) -> Dict[str, Optional[str]]:
    if not isinstance(value, dict) or not value:
        raise config_error(where, key, "must be a non-empty object {distribution: version or null}")
    for name, version in value.items():
        if not name or inventory.canonical(name) != name:
            raise config_error(
                where, "%s.%s" % (key, name), "is not a normalized name (PEP 503): %r" % inventory.canonical(name)
            )
        if version is not None and (not isinstance(version, str) or not version.strip() or version != version.strip()):
            raise config_error(where, "%s.%s" % (key, name), "must be a version string or null (any version)")
    return dict(value)


def outside(allowed: Dict[str, Optional[str]], installed: List[Any]) -> List[str]:
    """``name version (why)`` for each installed (name, version) the set does not allow, in name order."""
    wrong = []
    for name, version in sorted(installed):
        if name not in allowed:
            wrong.append("%s %s (not in the lock)" % (name, version))
        elif allowed[name] is not None and allowed[name] != version:
            wrong.append("%s %s (lock: %s)" % (name, version, allowed[name]))
    return wrong


def judge(item: Item, installed: List[Any], machine: str) -> CheckResult:
    """The check's result for ``installed`` ((name, version) pairs) on ``machine``."""
    target = "python distributions"
    if "machines" in item:
        allowed = item["machines"].get(machine)
        if allowed is None:
            detail = "no set of distributions for machine %s (sets for: %s)" % (
                machine,
                ", ".join(sorted(item["machines"])),
            )
            return CheckResult("inventory", target, False, detail)
    else:
        allowed = item["distributions"]
    wrong = outside(allowed, installed)
    if wrong:
        head = "%d distribution%s outside the lock: " % (len(wrong), "" if len(wrong) == 1 else "s")
        return CheckResult("inventory", target, False, short(head + ", ".join(wrong), 1200), log="\n".join(wrong))
    return CheckResult("inventory", target, True, "%d distributions, all in the lock" % len(installed))


class Inventory(Gate):
    key = "inventory"
    kind = "inventory"
    order = 55  # beside pip check: both judge the installed set
    passes_when = (
        "every distribution the image's python sees (importlib.metadata, the first of each PEP 503 name on sys.path, "
        "as pip sees them) is in `distributions` at its version (`null`: any version, a git component's tree); "
        "`machines`: the set of `platform.machine()`; fails naming each one outside the set or at another version"
    )
    never_does = "import"

    def parse(self, value: Any, where: str) -> List[Item]:
        if not isinstance(value, dict) or len(value) != 1 or not set(value) <= {"distributions", "machines"}:
            raise config_error(where, self.key, 'must be {"distributions": {...}} or {"machines": {MACHINE: {...}}}')
        if "distributions" in value:
            return [{"distributions": _set(value["distributions"], where, "inventory.distributions")}]
        machines = value["machines"]
        if not isinstance(machines, dict) or not machines:
            raise config_error(where, "inventory.machines", "must be a non-empty object {machine: {...}}")
        return [{"machines": {m: _set(s, where, "inventory.machines.%s" % m) for m, s in machines.items()}}]

    def dump(self, items: List[Item]) -> Any:
        return items[0]

    def merge(self, from_config: List[Item], from_flags: List[Item]) -> List[Item]:
        return from_config  # one set, from the config only

    def target(self, item: Any) -> str:
        return "python distributions"

    def check(self, item: Item) -> CheckResult:
        installed = [inventory.name_version(d) for d in inventory.distributions()]
        return judge(item, installed, platform.machine())
