"""The `patches` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.steps.base import Kind, patch_line


class Patches(Kind):
    """`patches` — applies, here, the variant's `patches` that belong to no component (trees that exist by now).

    Reads: the `patches` list (a component's own patches are applied by its `source` step, right after its copy).
    Leaves: the patched trees. Each patch is checked first, applied with full context and proved by a reverse
    check; any mismatch fails the build.
    May not: use zero-context hunks or `--3way` (the overlay guard refuses such patch files).
    """

    key = "patches"
    order = 10

    def view(self, step, v):
        return dict(step, patches=[p for p in v.get("patches") or () if "component" not in p])

    def lines(self, step, out):
        return ["\n".join(patch_line(p, out) for p in step["patches"])]
