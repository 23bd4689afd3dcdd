"""The `requirements` step kind (its contract is the class docstring)."""

from __future__ import annotations

import re

from toolkit.errors import short
from toolkit.render.quoting import shell_glob
from toolkit.spec.schema import STR_LIST
from toolkit.steps.base import Kind, check_flags_env, flag_words, need_component, run


class Requirements(Kind):
    """`requirements: COMPONENT` — pip installs the requirements file of a component's tree, less `exclude`.

    Reads: the component's `requirements` (a file in its tree) and `exclude` (names dropped by
    image_tools/requirements.py, which fails when a name is no longer in the file); options `flags` as `pip`, and
    `drop_system`
    (entries of /usr/lib/python3/dist-packages, a trailing `*` allowed, that the OS installed without a pip record,
    so pip could not replace them: they are removed first).
    Leaves: the requirements' distributions. Only the requirements file is mounted, so a change elsewhere in the
    tree keeps this layer. Over a variant whose lock holds its closure, the closure step has installed them: this
    step only checks, offline (`--no-index --no-deps --dry-run`), that the tree asks for nothing the closure lacks.
    May not: install the component itself (a `source` step does).
    """

    key = "requirements"
    order = 9
    main = str
    options = {"flags": STR_LIST, "drop_system": STR_LIST}

    def check(self, step, v, where):
        check_flags_env(step, v, where)
        comp = need_component(step["value"], v, where, "requirements")
        if "requirements" not in comp:
            raise where.error("requirements", f"component {short(step['value'])} names no `requirements` file")
        for i, name in enumerate(step.get("drop_system", [])):
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*\*?", name):
                raise where.error(f"drop_system[{i}]", f"a folder name (a trailing `*` allowed): {short(name)}")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        locked = bool(v.get("closure")) and not v.get("wheelhouse")
        return dict(
            step, name=step["value"], file=comp["requirements"], exclude=comp.get("exclude") or [], locked=locked
        )

    def lines(self, step, out):
        drop = " ".join(shell_glob("/usr/lib/python3/dist-packages/" + n) for n in step.get("drop_system", []))
        excludes = "".join(f" --exclude {out.word(n)}" for n in step["exclude"])
        mounts = (
            f"--mount=type=bind,from={out.src[step['name']]},source={out.word(step['file'])},target=/tmp/requirements.in"
            " --mount=type=bind,source=tools,target=/tmp/tools"
        )
        return [
            run(
                out.index_mount(),
                [
                    mounts,
                    out.index_env(),
                    f"rm -rf {drop} &&" if drop else "",
                    f"{out.word(out.python)} /tmp/tools/requirements.py /tmp/requirements.in{excludes}"
                    " >/tmp/requirements.txt &&",
                    # Over a closure: only a check that it holds the tree's requirements (nothing is fetched).
                    # --no-deps: what the installed distributions require is pip check's, with its allow rules (the
                    # cuDNN the closure holds over torch's own pin would otherwise fail here, offline).
                    f"pip install {out.pip_opts()} --no-index --no-deps --dry-run -r /tmp/requirements.txt &&"
                    if step.get("locked")
                    else f"pip install {out.pip_opts()}{flag_words(step)} -r /tmp/requirements.txt &&",
                    "rm /tmp/requirements.txt",
                ],
            )
        ]
