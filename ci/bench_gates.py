#!/usr/bin/env python3
"""Gate overhead: the full gate vs a bare `python -c "import <same modules>"` in the same image.

One long-lived container per run (network disabled, verify/ copied in). Each command is timed INSIDE the container
by a small python wrapper: wall seconds (what a build waits for) and CPU seconds of the command and its children
(what it costs; robust when other work shares the machine). Rounds alternate bare / runner-imports-only / full gate
so drift hits all alike, after one warm-up round. Prints markdown tables: min and median of each, ratios against
the bare import, and the full gate's per-check seconds.

    python3 -m ci.bench_gates [--image miles:smoke] [--target smoke | --config gates.json] [--python PY] [-n 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from toolkit.render import gate_bundle as bundle
from verify.config import load_config

ROOT = Path(__file__).resolve().parent.parent

RUNNER_DIR = "/opt/gate"


def _put(container, files):
    container.put_archive(RUNNER_DIR, bundle.tar_of(files))


WRAP = (
    "import json, resource, subprocess, sys, time\n"
    "argv = json.loads(sys.argv[1])\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)\n"
    "wall = time.perf_counter() - t\n"
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': p.returncode, 'wall': wall, 'cpu': ru.ru_utime + ru.ru_stime,"
    " 'out': p.stdout.decode(errors='replace')[-2000:]}))\n"
)


def _timed(container, python, argv):
    """(wall, cpu) seconds of one run, measured inside the container."""
    code, out = container.exec_run([python, "-c", WRAP, json.dumps(argv)], workdir=RUNNER_DIR)
    got = json.loads(out.decode().strip().splitlines()[-1]) if code == 0 else {"rc": code, "out": out.decode()}
    if got["rc"] != 0:
        raise SystemExit("bench_gates: %s exited %d:\n%s" % (argv, got["rc"], got["out"]))
    return got["wall"], got["cpu"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image", default="miles:smoke")
    p.add_argument("--config", help="gate config JSON (default: the gates of --target's spec)")
    p.add_argument("--target", default="smoke", help="the target whose spec gates are timed (default: smoke)")
    p.add_argument("--python", default="/opt/venv/bin/python")
    p.add_argument("-n", "--repeat", type=int, default=7)
    args = p.parse_args(argv)

    import docker

    if args.config:
        load_config(args.config)  # fail early, one line, on a bad config
        gates = json.loads(Path(args.config).read_text())
    else:  # the target's own gate list, from its spec
        from toolkit.spec.catalog import load_catalog

        gates = load_catalog().resolve(args.target).gates
    modules = gates.get("imports") or []
    no_commands = {k: v for k, v in gates.items() if k != "commands"}
    cases = {
        "bare python -c import": [args.python, "-c", "import " + ", ".join(modules)],
        "verify, imports only": [args.python, "-m", "verify"] + [a for m in modules for a in ("--import", m)],
        "verify, gate without commands": [args.python, "-m", "verify", "--config", "gates-no-commands.json"],
        "verify, full gate (+ commands)": [
            args.python,
            "-m",
            "verify",
            "--config",
            "gates.json",
            "--json",
            "/tmp/r.json",
        ],
    }
    client = docker.from_env(timeout=600)
    container = client.containers.create(args.image, command=["sleep", "infinity"], network_disabled=True)
    try:
        container.start()
        container.exec_run(["mkdir", "-p", RUNNER_DIR])
        _put(container, bundle.payload_bytes())
        _put(
            container,
            {"gates.json": json.dumps(gates).encode(), "gates-no-commands.json": json.dumps(no_commands).encode()},
        )
        walls: dict[str, list] = {name: [] for name in cases}
        cpus: dict[str, list] = {name: [] for name in cases}
        for round_no in range(args.repeat + 1):
            for name, cmd in cases.items():
                wall, cpu = _timed(container, args.python, cmd)
                if round_no:  # round 0 warms the page cache
                    walls[name].append(wall)
                    cpus[name].append(cpu)
        _, report = container.exec_run(["cat", "/tmp/r.json"])
        checks = json.loads(report)["checks"]
    finally:
        container.remove(force=True)

    bare = "bare python -c import"
    print(
        "image %s, %d runs each after one warm-up; seconds per run, measured inside the container\n"
        % (args.image, args.repeat)
    )
    print("| command | wall min | wall median | CPU min | CPU median | wall min vs bare | CPU min vs bare |")
    print("|---|---|---|---|---|---|---|")
    for name in cases:
        w, c = walls[name], cpus[name]
        print(
            "| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx |"
            % (
                name,
                min(w),
                statistics.median(w),
                min(c),
                statistics.median(c),
                min(w) / min(walls[bare]),
                min(c) / min(cpus[bare]),
            )
        )
    print("\nfull gate, last run, per check (seconds inside the runner; command gates run side by side):\n")
    print("| check | target | seconds |")
    print("|---|---|---|")
    rows: dict = {}  # one row per (kind, target): pip check reports one result per conflict line, all from one pip run
    for c in checks:
        rows.setdefault((c["kind"], c["target"]), []).append(c["seconds"])
    for (kind, target), secs in rows.items():
        lines = " (%d lines)" % len(secs) if len(secs) > 1 else ""
        print("| %s | %s%s | %.3f |" % (kind, target, lines, max(secs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
