#!/usr/bin/env python3
"""Build benchmark (run on purpose, not a test): cold smoke build, no-op rebuild, bridge-only edit, renders.

Runs in a throwaway copy of the project (the bridge edit never touches the checkout), all in one run, and prints
wall seconds and ratios to the cold build. "Cold" means no BuildKit cache, no base image and no wheelhouse
image: everything the toolkit makes itself is made again (the downloaded wheels are a cache and are kept;
--wheelhouse-cold drops them too).
It prunes the engine's build cache: do not run it where that cache matters.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "tests", "bench")


def timed(cmd, cwd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return took


def render_all_seconds(repeat: int = 5) -> tuple[float, float]:
    """In-process render of every target (spec load included), and the same through the CLI (process start)."""
    from toolkit.plan.build_plan import make_plan
    from toolkit.render.dockerfile import render
    from toolkit.spec.catalog import load_catalog

    inproc = []
    for _ in range(repeat):
        start = time.perf_counter()
        catalog = load_catalog()
        for v in catalog.variants.values():
            render(make_plan(v, revision="bench"))
        inproc.append(time.perf_counter() - start)
    cli = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            start = time.perf_counter()
            for name in load_catalog().variants:
                subprocess.run(
                    [sys.executable, "build.py", "render", "--target", name, "-o", f"{tmp}/{name}"],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                )
            cli.append(time.perf_counter() - start)
    return statistics.median(inproc), statistics.median(cli)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheelhouse-cold", action="store_true", help="also drop the wheelhouse download cache")
    args = ap.parse_args()

    import docker

    from toolkit.plan.wheelhouse import image_ref
    from toolkit.render.context import PROJECT_ITEMS
    from toolkit.spec.catalog import load_catalog

    client = docker.from_env()
    smoke = load_catalog().resolve("smoke")
    with tempfile.TemporaryDirectory(prefix="miles-bench-") as tmp:
        proj = Path(tmp) / "project"
        proj.mkdir()
        for item in PROJECT_ITEMS:
            src = ROOT / item
            (shutil.copytree(src, proj / item, ignore=IGNORE) if src.is_dir() else shutil.copy2(src, proj / item))
        cache = ROOT / ".cache"
        if args.wheelhouse_cold:
            shutil.rmtree(cache / "wheelhouse", ignore_errors=True)
        cache.mkdir(exist_ok=True)
        (proj / ".cache").symlink_to(cache)
        build = [sys.executable, "build.py", "--target", "smoke", "--tag", "miles-bench:smoke"]

        for ref in (smoke.base, image_ref(smoke), "miles-bench:smoke"):
            try:
                client.images.remove(ref, force=True)
            except docker.errors.ImageNotFound:
                pass
        client.api.prune_builds()  # the engine's whole build cache
        subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True)
        cold = timed(build, proj)
        noop = timed(build, proj)
        init = proj / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
        init.write_text(init.read_text() + "\n# bench: bridge-only edit\n")
        bridge = timed(build, proj)
        noop2 = timed(build, proj)
    render_in, render_cli = render_all_seconds()

    rows = [
        ("cold smoke build (no cache, no base/wheel images)", cold, None),
        ("no-op rebuild", noop, 0.02),
        ("bridge-only edit rebuild", bridge, 0.05),
        ("no-op rebuild (again)", noop2, 0.02),
        ("render all 8 targets, in-process", render_in, None),
        ("render all 8 targets, 8 CLI processes", render_cli, None),
    ]
    print(f"\n{'step':<46} {'seconds':>8} {'÷ cold':>8} {'goal':>8}")
    for name, sec, goal in rows:
        ratio = sec / cold
        goal_s = f"≤{goal:.0%}" if goal else ("≤0.5 s" if "in-process" in name else "")
        verdict = "" if goal is None else ("ok" if ratio <= goal else "MISSED")
        if "in-process" in name:
            verdict = "ok" if sec <= 0.5 else "MISSED"
        print(f"{name:<46} {sec:>8.2f} {ratio:>8.1%} {goal_s:>8} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
