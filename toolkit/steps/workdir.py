"""The `workdir` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.spec.values import check_abs_path
from toolkit.steps.base import Kind


class Workdir(Kind):
    """`workdir: PATH` — the working directory of the steps after it and of the image.

    Reads: an absolute path. Leaves: the image's working directory. May not: be relative.
    """

    key = "workdir"
    order = 12
    main = str

    def check(self, step, v, where):
        check_abs_path(step["value"], where.file, f"{where.key}.workdir")

    def lines(self, step, out):
        return ["WORKDIR " + out.word(step["value"])]
