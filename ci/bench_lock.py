#!/usr/bin/env python3
"""Lock benchmark (run on purpose, not a test): `build.py lock` of a GPU-sized family against local servers.

A throwaway project copy gets a family shaped like images/rocm.yaml's sources: git repositories served as dumb
HTTP on 127.0.0.1 (branch-, tag- and commit-tracked) and artifacts (one wheel by URL, a release of several
assets) with a releases API beside them; the servers are the tests' own (tests/local_servers.py). Prints wall
seconds of a cold lock (every policy resolved, every artifact downloaded), a no-op lock, `--check`, and
`--update` (all re-resolved), and the lock file's size.

    python3 -m ci.bench_lock [--repos 9] [--wheel-mib 64] [--assets 3] [--asset-mib 32]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from local_servers import ArtifactServer, GitServer, env_for  # noqa: E402

from toolkit.table import table  # noqa: E402


def timed(cmd, cwd, env) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(cmd[1:])} failed ({proc.returncode}): {proc.stderr.strip()}")
    return took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ci.bench_lock", description=__doc__.splitlines()[0])
    ap.add_argument("--repos", type=int, default=9)
    ap.add_argument("--wheel-mib", type=int, default=64)
    ap.add_argument("--assets", type=int, default=3)
    ap.add_argument("--asset-mib", type=int, default=32)
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp_name:
        tmp = Path(tmp_name)
        proj = tmp / "project"
        proj.mkdir()
        for item in ("build.py", "toolkit", "images", "templates", "verify"):
            src = ROOT / item
            if src.is_dir():
                shutil.copytree(src, proj / item, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, proj / item)
        g, a = GitServer(tmp / "git"), ArtifactServer()
        try:
            components = {}
            for i in range(opts.repos):
                url = g.create(f"org/repo{i}")
                commit = g.commit(f"org/repo{i}", {"f.py": f"N = {i}\n"}, tag="v1.0")
                kind = ("branch", "tag", "commit")[i % 3]
                track = (
                    {"branch": "main"}
                    if kind == "branch"
                    else {"tag": "v1.0"}
                    if kind == "tag"
                    else {"commit": commit, "branch": "main"}
                )
                components[f"repo{i}"] = {"git": url, "track": track}
            blob = bytes(range(256)) * 4096  # 1 MiB
            artifacts = {"wheel": {"url": a.file("w-1.0-py3-none-any.whl", blob * opts.wheel_mib)}}
            a.release(
                "org/wheels", "cu130", {f"p{i}-1.0-py3-none-any.whl": blob * opts.asset_mib for i in range(opts.assets)}
            )
            artifacts["wheels"] = {"release": {"repo": "org/wheels", "tag": "cu130"}}
            data = yaml.safe_load((ROOT / "images" / "smoke.yaml").read_text())
            data.update(
                family="benchlock",
                default="benchlock",
                variants={"benchlock": {}},
                components=components,
                artifacts=artifacts,
            )
            (proj / "images" / "benchlock.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
            env = env_for(a.api)
            lock = [sys.executable, "build.py", "lock", "--family", "benchlock"]
            rows = [
                ["cold lock (resolve all, download all)", f"{timed(lock, proj, env):.2f}"],
                ["no-op lock", f"{timed(lock, proj, env):.2f}"],
                ["lock --check", f"{timed([*lock, '--check'], proj, env):.2f}"],
                ["lock --update (all again)", f"{timed([*lock, '--update'], proj, env):.2f}"],
            ]
            size = (proj / "images" / "benchlock.lock.json").stat().st_size
        finally:
            g.stop()
            a.stop()
    mib = opts.wheel_mib + opts.assets * opts.asset_mib
    print(
        f"{opts.repos} git sources (branch/tag/commit), {1 + opts.assets} artifacts ({mib} MiB), lock file {size} bytes"
    )
    print(table(["step", "seconds"], rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
