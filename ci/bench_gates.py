#!/usr/bin/env python3
"""Gate overhead (issue 3): the full gate vs a bare `python -c "import <same modules>"` in the same image.

One long-lived container per run (network disabled, verify/ copied in); each command is timed from the host
around `docker exec`, alternating bare / runner-imports-only / full gate so drift hits all alike, after one
warm-up round. Prints a markdown table with min and median and the full gate's per-check seconds.

    python ci/bench_gates.py [--image miles:smoke] [--config gates.json] [--python /opt/venv/bin/python] [-n 7]
"""
from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify import bundle  # noqa: E402
from verify.config import load_config  # noqa: E402

# The smoke image's gate list (images/smoke.yaml `gates`), used when --config is not given.
SMOKE_GATES = {
    "imports": ["torch", "triton", "transformers", "sglang_attn_bridge"],
    "compile": ["sglang_attn_bridge"],
    "platform": "cpu",
    "pip_check": {"allow": []},
    "provenance": {"sglang_attn_bridge": "site-packages", "transformers": "site-packages"},
}
RUNNER_DIR = "/opt/gate"


def _put(container, files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    container.put_archive(RUNNER_DIR, buf.getvalue())


def _timed(container, argv):
    start = time.perf_counter()
    code, out = container.exec_run(argv, workdir=RUNNER_DIR)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit("bench_gates: %s exited %d:\n%s" % (argv, code, out.decode(errors="replace")[-2000:]))
    return elapsed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image", default="miles:smoke")
    p.add_argument("--config", help="gate config JSON (default: the smoke image's gates)")
    p.add_argument("--python", default="/opt/venv/bin/python")
    p.add_argument("-n", "--repeat", type=int, default=7)
    args = p.parse_args(argv)

    import docker

    gates = json.loads(Path(args.config).read_text()) if args.config else SMOKE_GATES
    if args.config:
        load_config(args.config)  # fail early, one line, on a bad config
    modules = gates.get("imports") or []
    cases = {
        "bare python -c import": [args.python, "-c", "import " + ", ".join(modules)],
        "verify, imports only": [args.python, "-m", "verify"] + [a for m in modules for a in ("--import", m)],
        "verify, full gate": [args.python, "-m", "verify", "--config", "gates.json", "--json", "/tmp/r.json"],
    }
    client = docker.from_env(timeout=600)
    container = client.containers.create(args.image, command=["sleep", "infinity"], network_disabled=True)
    try:
        container.start()
        container.exec_run(["mkdir", "-p", RUNNER_DIR])
        files = {name[len("verify/"):]: data for name, data in bundle.runner_files().items()}
        _put(container, {"verify/" + k: v for k, v in files.items()})
        _put(container, {"gates.json": json.dumps(gates).encode()})
        times = {name: [] for name in cases}
        for round_no in range(args.repeat + 1):
            for name, cmd in cases.items():
                t = _timed(container, cmd)
                if round_no:  # round 0 warms the page cache
                    times[name].append(t)
        _, report = container.exec_run(["cat", "/tmp/r.json"])
        checks = json.loads(report)["checks"]
    finally:
        container.remove(force=True)

    bare = statistics.median(times["bare python -c import"])
    print("image %s, %d runs each after one warm-up; seconds per run, timed around docker exec\n"
          % (args.image, args.repeat))
    print("| command | min | median | median vs bare |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        print("| %s | %.2f | %.2f | %.2fx |" % (name, min(ts), statistics.median(ts), statistics.median(ts) / bare))
    print("\nfull gate, last run, per check (seconds inside the runner):\n")
    print("| check | target | seconds |")
    print("|---|---|---|")
    for c in checks:
        print("| %s | %s | %.3f |" % (c["kind"], c["target"], c["seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
