"""The `artifact` step kind (its contract is the class docstring)."""

from __future__ import annotations

import re

from toolkit.errors import short
from toolkit.plan import artifacts as art
from toolkit.spec.values import check_abs_path
from toolkit.steps.base import Kind, need_artifact, run


class Artifact(Kind):
    """`artifact: NAME` with `to: PATH`, or `over: LINK` and `expect: FILE` — installs a checksum-pinned file.

    Reads: a family artifact (one file by URL, its sha256 from the lock); `to` (the absolute path the file is
    installed at, mode 0644, or 0755 with `executable: true`), or `over` (an absolute path whose link target the
    file replaces, a shared library say) with `expect` (the file name that target must have, so the file replaces
    the build it was made for; the original is kept beside it as `<target>.orig`).
    Leaves: the file. BuildKit fetches it in a stage of its own and checks its digest; the step bind-mounts it.
    May not: run the file, or install anything while the artifact is pending in the lock (the step is then left out
    and the image's `io.miles.source.NAME` label says so).
    """

    key = "artifact"
    order = 11
    main = str
    options = {"to": str, "over": str, "expect": str, "executable": bool}

    def check(self, step, v, where):
        need_artifact(step["value"], v, where, "artifact")
        if ("to" in step) == ("over" in step):
            raise where.error("", "exactly one of `to` (a file path) and `over` (a link whose target it replaces)")
        path = step.get("to", step.get("over", ""))
        check_abs_path(path, where.file, f"{where.key}.{'to' if 'to' in step else 'over'}")
        if "over" in step and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", step.get("expect", "")):
            raise where.error("expect", f"`over` needs `expect`, the target's file name: {short(step.get('expect'))}")
        if "over" not in step and "expect" in step:
            raise where.error("expect", "`expect` goes with `over`")

    def uses(self, step, v):
        return {("artifacts", step["value"])}

    def view(self, step, v):
        record = v["artifacts"][step["value"]]
        if art.is_pending(record):
            return dict(step, pending=True)
        return dict(step, file=art.file_name(record), reads_artifacts=[step["value"]])

    def lines(self, step, out):
        if step.get("pending"):
            name = step["value"]
            return [
                f"# artifact {name} is pending in the lock (`build.py lock --update {name}`): this step is left out"
            ]
        file = out.word(f"{out.artifact_dir}/{step['value']}/{step['file']}")
        mount = out.artifact_mount(step["value"])
        if "to" in step:
            mode = "0755" if step.get("executable") else "0644"
            return [run(mount, [f"install -D -m {mode} {file} {out.word(step['to'])}"])]
        over, expect = step["over"], step["expect"]
        return [
            run(
                mount,
                [
                    f'target="$(readlink -f {out.word(over)})" &&',
                    f'if [ "$(basename "$target")" != {out.word(expect)} ]; then echo'
                    f' {out.word(over + " resolves to a file other than " + expect)} "($target)" >&2; exit 1; fi &&',
                    'cp -a "$target" "$target.orig" &&',
                    f'install -m 0644 {file} "$target"',
                ],
            )
        ]
