"""The `closure` step kind (its contract is the class docstring)."""

from __future__ import annotations

import re

from toolkit.render.quoting import shell_glob
from toolkit.spec.schema import STR_LIST
from toolkit.spec.values import PLATFORM_MACHINES
from toolkit.steps.base import Kind, run

FILE = "closure.txt"  # the build context's copy of what this step installs (toolkit/render/context.py writes it)


class Closure(Kind):
    """`closure` — installs the variant's locked environment: every distribution of the lock's `closure` that the
    image's steps and trees ask for (not what only the base's own distributions bring), exactly the files the lock
    records (`--require-hashes --no-deps`, wheels only: an sdist is built by the step that names it).

    Reads: the lock's `closure` for the variant (`build.py lock`), written into the build context as
    `closure.txt`; option `drop_system` (entries of /usr/lib/python3/dist-packages, a trailing `*` allowed, that
    the OS installed without a pip record, so pip could not replace them: removed first).
    Leaves: the closure's distributions; what the base already holds at the same version stays as it is. Later
    `pip` steps install their own pins with `--no-deps` and the same hashes, so no step resolves anything.
    May not: resolve, or install a file the lock does not name. A variant whose lock holds no closure renders a
    comment saying so instead.
    """

    key = "closure"
    order = 13
    options = {"drop_system": STR_LIST}

    def check(self, step, v, where):
        for i, name in enumerate(step.get("drop_system", [])):
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*\*?", name):
                raise where.error(f"drop_system[{i}]", f"a folder name (a trailing `*` allowed): {name!r}")

    def view(self, step, v):
        return dict(step, locked=bool(v.get("closure")))

    def lines(self, step, out):
        if not step["locked"]:
            return ["# not hash-locked: the lock holds no closure for this variant (`build.py lock`)"]
        drop = " ".join(shell_glob("/usr/lib/python3/dist-packages/" + n) for n in step.get("drop_system", []))
        return [
            run(
                out.index_mount() + f" --mount=type=bind,source={FILE},target=/tmp/{FILE}",
                [
                    out.index_env(),
                    f"rm -rf {drop} &&" if drop else "",
                    f"pip install {out.pip_opts()} --require-hashes --no-deps --only-binary :all: -r /tmp/{FILE}",
                ],
            )
        ]


def requirements_text(closure: dict) -> str:
    """The hashed requirements file of a variant's closure ({platform: {name: {version, files}}}): one line per
    distribution with every sha256 the lock records for it on the variant's platforms; a distribution found on
    only some of them, or at other versions, gets one line per platform with a `platform_machine` marker. Wheels
    only: a distribution the index offers as an sdist alone is built by its own step."""
    if not closure:
        return ""
    names = sorted({n for packages in closure.values() for n in packages})
    lines = []
    for name in names:
        found = {p: packages.get(name) for p, packages in closure.items()}
        if not any(f and any(file.endswith(".whl") for file in f["files"]) for f in found.values()):
            continue
        versions = {f["version"] for f in found.values() if f}
        if None not in found.values() and len(versions) == 1:
            shas = sorted({sha for f in found.values() for sha in f["files"].values()})
            lines.append(_line(name, versions.pop(), shas, ""))
            continue
        for platform, f in sorted(found.items()):
            if f:
                marker = f' ; platform_machine == "{PLATFORM_MACHINES[platform]}"'
                lines.append(_line(name, f["version"], sorted(set(f["files"].values())), marker))
    return "".join(lines)


def _line(name: str, version: str, shas: list, marker: str) -> str:
    return f"{name}=={version}{marker}" + "".join(f" \\\n    --hash=sha256:{s}" for s in shas) + "\n"
