"""Every `pip install` of every GPU render that could fetch a file no lock names: `python3 -m ci.unhashed_installs`.

A GPU image installs only its locked closure: an index install carries `--require-hashes`, a tree of a git component
(its commit pinned, or `--source`) installs with `--no-deps`, and miles' requirements are only checked offline
(`--no-index`). This prints, per target, each RUN that breaks that rule and exits 1 if any does: only the CUDA
family's flashinfer install from flashinfer's own index, which this host cannot reach to lock.
"""

from __future__ import annotations

import re
import sys

from toolkit.lock.pip_index import gpu_variants
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

_INSTALL = re.compile(r"\bpip install\b(?P<rest>[^&;|]*)")


def problems(dockerfile: str) -> list[str]:
    """One line per `pip install` that may fetch an unhashed file or resolve on its own."""
    out = []
    text = dockerfile.replace("\\\n", " ")
    for line in text.splitlines():
        if not line.startswith("RUN "):
            continue
        for m in _INSTALL.finditer(line):
            rest = m.group("rest")
            if "--require-hashes" in rest or "--no-index" in rest:
                continue
            if "--no-deps" in rest and re.search(r"(^|\s)(-e\s+)?'?/", rest.split("--no-deps", 1)[1]):
                continue  # a tree in the image (a git component at its commit), with nothing resolved
            out.append(" ".join(("pip install" + rest).split()))
    return out


def main() -> int:
    catalog = load_catalog()
    bad = 0
    for v in gpu_variants(catalog):
        found = problems(render(make_plan(catalog.resolve(v.name), revision="check")))
        bad += len(found)
        print(f"{v.name}: {len(found)} install(s) not hash-locked")
        for line in found:
            print(f"  {line[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
