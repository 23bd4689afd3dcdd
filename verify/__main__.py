"""``python -m verify``: the gate runner CLI. Exit 0 when every check passed, 1 when one failed, 2 on bad usage.

Each gate kind (``verify/kinds``) adds its own flags. ``--json -`` writes the JSON report to stdout, as one line
after every check ran, and the per-check lines to stderr: a build log then carries a report a program can read.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, NoReturn, Optional

from . import report
from .config import ConfigError, GateConfig, load_config
from .env_flag import BadEnvironment, gpu_required
from .kinds import KINDS
from .runner import run_checks

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        sys.stderr.write("verify: error: %s (see python -m verify --help)\n" % message)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m verify", description="Import gates run inside an image with its own python.")
    for kind in KINDS:
        kind.add_flags(p)
    p.add_argument("--config", metavar="FILE", help="JSON gate config; flags add to it")
    p.add_argument("--json", metavar="FILE", help="write a JSON report ('-': to stdout, one line; lines to stderr)")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    return p


def config_from_args(args: argparse.Namespace) -> GateConfig:
    """The config file (if any) plus everything the flags add."""
    cfg = load_config(args.config) if args.config else GateConfig()
    cfg.merge_flags(args)
    return cfg


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        gpu_required()  # the environment is read before any check starts: a bad value is bad usage
        cfg = config_from_args(args)
    except (ConfigError, BadEnvironment) as exc:
        sys.stderr.write("verify: error: %s\n" % exc)
        return EXIT_USAGE
    if cfg.is_empty():
        sys.stderr.write("verify: error: nothing to check: give --config or at least one check flag\n")
        return EXIT_USAGE
    console = sys.stderr if args.json == "-" else sys.stdout

    def show(res):
        print(report.line(res), file=console, flush=True)

    results = run_checks(cfg, on_result=show)
    print(report.summary(results), file=console, flush=True)
    if args.json == "-":
        sys.stdout.write(report.stream_line(results))
        sys.stdout.flush()
    writers = ((None if args.json == "-" else args.json, report.write_json), (args.junit, report.write_junit))
    for path, writer in writers:
        if path:
            try:
                writer(results, path)
            except OSError as exc:
                sys.stderr.write("verify: error: cannot write %s: %s\n" % (path, exc.strerror or exc))
                return EXIT_USAGE
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
