"""The `pip_uninstall` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.spec.schema import STR_LIST
from toolkit.spec.values import pip_name_problem
from toolkit.steps.base import Kind


class PipUninstall(Kind):
    """`pip_uninstall: [NAME, ...]` — removes distributions the base image carries, before a step replaces them.

    Reads: distribution names. Leaves: nothing of them. May not: fail when one is absent (pip only warns).
    """

    key = "pip_uninstall"
    order = 4
    main = STR_LIST

    def check(self, step, v, where):
        for i, name in enumerate(step["value"]):
            problem = pip_name_problem(name)
            if problem:
                raise where.error(f"pip_uninstall[{i}]", problem)

    def lines(self, step, out):
        return ["RUN pip uninstall -y " + " ".join(out.word(n) for n in step["value"])]
