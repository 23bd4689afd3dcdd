#!/usr/bin/env python3
"""miles-cpu build benchmark (run on purpose, not a test): cold build, no-op rebuild, a one-line miles change
through `--source`, and the image's size, in one run, with ratios to the cold build.

"Cold" is `--no-cache` (every step of the Dockerfile runs; the locally made base image and the wheelhouse image
are kept, so their one-time preparation is not counted). The one-line change edits a docstring line of miles'
actor in an unpacked copy of the source, so only the layers after the miles source should rerun. The engine's
build cache is left alone; the bench's tag is `miles-bench:miles-cpu`.

    python3 -m ci.bench_miles [--source ../shared/upstream/miles-v0.1.0.tar.gz]
                             [--megatron ../shared/upstream/megatron-lm-37f91617b.tar.gz]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TAG = "miles-bench:miles-cpu"
ACTOR = Path("miles/backends/fsdp_utils/actor.py")


def build(argv) -> tuple:
    """(wall seconds, the Dockerfile steps that ran rather than came from the cache) of one `build.py build`."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "build.py", "build", "--target", "miles-cpu", "--tag", TAG, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(
            f"bench: build {' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
        )
    steps = [
        ln.split("]")[0].strip() + "]"
        for ln in proc.stdout.splitlines()
        if ln.strip().startswith("[stage-0") and not ln.rstrip().endswith("cached") and " FROM " not in ln
    ]
    return took, steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(ROOT.parent / "shared" / "upstream" / "miles-v0.1.0.tar.gz"))
    ap.add_argument("--megatron", default=str(ROOT.parent / "shared" / "upstream" / "megatron-lm-37f91617b.tar.gz"))
    args = ap.parse_args()
    import docker

    with tempfile.TemporaryDirectory(prefix="miles-bench-") as tmp:
        with tarfile.open(args.source) as tar:
            tar.extractall(tmp, filter="data")
        tree = next(Path(tmp).iterdir())
        source = ["--source", f"miles={tree}", "--source", f"megatron_lm={args.megatron}"]
        rows = [
            ("cold (--no-cache; base and wheelhouse kept)", *build(source + ["--no-cache"])),
            ("no-op rebuild", *build(source)),
        ]
        actor = tree / ACTOR
        actor.write_text(actor.read_text().replace('"""Pause CUDA memory', '"""Pause the CUDA memory', 1))
        rows.append(("one-line miles change (--source)", *build(source)))
    size = docker.from_env().images.get(TAG).attrs["Size"]
    cold = rows[0][1]
    print(f"\n{'miles-cpu build':<46} {'seconds':>8} {'÷ cold':>8}  steps that ran")
    for name, sec, ran in rows:
        print(f"{name:<46} {sec:>8.1f} {sec / cold:>8.1%}  {len(ran)}: {' '.join(r.split()[-1] for r in ran)}")
    print(f"{'image size':<46} {size / 1e9:>7.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
