"""The `make` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.errors import short
from toolkit.render.quoting import shell_glob
from toolkit.spec.schema import STR_MAP
from toolkit.spec.values import IDENT_RE, check_abs_path
from toolkit.steps.base import GLOB_RE, Kind, check_refs, need_component, run


class Make(Kind):
    """`make: COMPONENT` with `vars`, `binaries`, `to` — builds a component's tree with make, keeps some binaries.

    Reads: the component (built in its `subdir`), `vars` (make variables; `${NAME}` references allowed),
    `binaries` (a path pattern under that folder, `*` allowed) and `to` (where the binaries go).
    Leaves: the matching binaries in `to`; the tree and the build folder are a bind mount, gone after the step.
    May not: install anything else.
    """

    key = "make"
    order = 7
    main = str
    options = {"vars": STR_MAP, "binaries": str, "to": str}

    def check(self, step, v, where):
        need_component(step["value"], v, where, "make")
        for name, value in step.get("vars", {}).items():
            if not IDENT_RE.fullmatch(name):
                raise where.error(f"vars.{short(name, 40, quote=False)}", "make variable names are identifiers")
            check_refs(value, v.get("args") or {}, where, f"vars.{name}")
        binaries = step.get("binaries", "")
        if not GLOB_RE.fullmatch(binaries) or binaries.startswith("/") or ".." in binaries.split("/"):
            raise where.error("binaries", f"a relative path pattern is required, got {short(binaries)}")
        check_abs_path(step.get("to", ""), where.file, f"{where.key}.to")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        return dict(step, name=step["value"], subdir=comp.get("subdir", ""))

    def lines(self, step, out):
        top = "/tmp/src/" + step["name"]
        tree = top + ("/" + step["subdir"] if step["subdir"] else "")
        make_vars = " ".join(f"{k}={out.word(val)}" for k, val in sorted(step.get("vars", {}).items()))
        return [
            run(
                out.source_mount(step["name"], top),
                [
                    f'make -C {out.word(tree)} -j"$(nproc)" {make_vars} &&',
                    f"cp {shell_glob(tree + '/' + step['binaries'])} {out.word(step['to'])}/",
                ],
            )
        ]
