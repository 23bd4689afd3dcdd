"""The `apt` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.errors import short
from toolkit.spec.schema import STR_LIST
from toolkit.spec.values import DEBIAN_NAME_RE
from toolkit.steps.base import Kind, check_refs, expand, run


class Apt(Kind):
    """`apt: [PACKAGE, ...]` — Debian/Ubuntu packages from the base image's archive, without recommends.

    Reads: package names (Debian's grammar; `${NAME}` references allowed).
    Leaves: the packages; the apt lists are removed in the same layer.
    May not: pin versions (the vendor archives drop old versions; the base image's tag pins the distribution).
    """

    key = "apt"
    order = 2
    main = STR_LIST

    def check(self, step, v, where):
        for i, name in enumerate(step["value"]):
            check_refs(name, v.get("args") or {}, where, f"apt[{i}]")
            if not DEBIAN_NAME_RE.fullmatch(expand(name, v.get("args") or {})):
                raise where.error(f"apt[{i}]", f"not a Debian package name: {short(name)}")

    def lines(self, step, out):
        names = " ".join(out.word(n) for n in step["value"])
        return [
            run(
                "apt-get update &&",
                [f"apt-get install -y --no-install-recommends {names} &&", "rm -rf /var/lib/apt/lists/*"],
            )
        ]
