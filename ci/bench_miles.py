#!/usr/bin/env python3
"""miles-cpu build benchmark (run on purpose, not a test): cold build, no-op rebuild, a one-line miles change
through `--source`, and the image's size, in one run, with ratios to the cold build.

"Cold" is `--no-cache` (every step of the Dockerfile runs; the locally made base image and the wheelhouse image
are kept, so their one-time preparation is not counted). The one-line change edits a docstring line of miles'
actor in an unpacked copy of the source, so only the layers after the miles source should rerun. The engine's
build cache is left alone; the bench's tag is `miles-bench:miles-cpu`.

    python ci/bench_miles.py [--source ../shared/upstream/miles-31f1ca961.tar.gz]
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "ci"))

from bench_build import timed  # noqa: E402

TAG = "miles-bench:miles-cpu"
ACTOR = Path("miles/backends/fsdp_utils/actor.py")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(ROOT.parent / "shared" / "upstream" / "miles-31f1ca961.tar.gz"))
    args = ap.parse_args()
    import docker

    build = [sys.executable, "build.py", "build", "--target", "miles-cpu", "--tag", TAG]
    with tempfile.TemporaryDirectory(prefix="miles-bench-") as tmp:
        with tarfile.open(args.source) as tar:
            tar.extractall(tmp, filter="data")
        tree = next(Path(tmp).iterdir())
        source = ["--source", f"miles={tree}"]
        cold = timed(build + source + ["--no-cache"], ROOT)
        noop = timed(build + source, ROOT)
        actor = tree / ACTOR
        text = actor.read_text()
        actor.write_text(text.replace('"""Pause CUDA memory', '"""Pause the CUDA memory', 1))
        edit = timed(build + source, ROOT)
    size = docker.from_env().images.get(TAG).attrs["Size"]
    print(f"\n{'miles-cpu build':<48} {'seconds':>8} {'÷ cold':>8}")
    for name, sec in (("cold (--no-cache; base and wheelhouse kept)", cold), ("no-op rebuild", noop),
                      ("one-line miles change (--source)", edit)):
        print(f"{name:<48} {sec:>8.1f} {sec / cold:>8.1%}")
    print(f"{'image size':<48} {size / 1e9:>7.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
