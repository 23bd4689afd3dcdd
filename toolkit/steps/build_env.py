"""The `build_env` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.errors import short
from toolkit.spec.schema import STR_MAP
from toolkit.spec.values import IDENT_RE
from toolkit.steps.base import Kind, check_refs


class BuildEnv(Kind):
    """`build_env: {NAME: VALUE, ...}` — ENV for the steps that follow (compilers' target lists and the like).

    Reads: the mapping (rendered sorted by name); values may reference build args as `${NAME}`.
    Leaves: the variables in the image's configuration (ENV persists into the image).
    May not: hold a runtime setting the gates must judge; those go in the family's `env`, set right before the gates.
    """

    key = "build_env"
    order = 1
    main = STR_MAP

    def check(self, step, v, where):
        for name, value in step["value"].items():
            if not IDENT_RE.fullmatch(name):
                raise where.error(short(name, 40, quote=False), "names are identifiers")
            check_refs(value, v.get("args") or {}, where, name)

    def lines(self, step, out):
        pairs = [f"{k}={out.dfword(val)}" for k, val in sorted(step["value"].items())]
        return ["ENV " + " \\\n    ".join(pairs)]
