"""``python -m verify``: the gate runner CLI. Exit 0 when every check passed, 1 when one failed, 2 on bad usage.

Each gate kind (``verify/kinds``) adds its own flags. ``--json -`` writes the JSON report to stdout, as one line
after every check ran, and the per-check lines to stderr: a build log then carries a report a program can read.
``--verbose`` also lists every allowed pip-check line with the rule that allowed it and the rule's reason (the JSON
report always holds them: each allowed check's ``allowed_by``). The summary line names the report file written.
``--nonce`` is the caller's nonce for this run: the report carries it, with the interpreter that ran the gates and
a proof tying the two to the checks, so the caller can tell this runner's report from no report, a stale one or a
program that only pretends to be Python. The runner refuses to run on anything but CPython 3 (exit 1, one line).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, NoReturn, Optional

from . import inventory, report
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
    p.add_argument(
        "--json",
        metavar="FILE",
        action="append",
        default=[],
        help="write a JSON report ('-': to stdout, one line; lines to stderr); repeat for several",
    )
    p.add_argument(
        "--json-line",
        metavar="FILE",
        help="write the one-line report an image keeps: outcomes and proof, no times or logs",
    )
    p.add_argument(
        "--inventory-json",
        metavar="FILE",
        help="a mode of its own: write what the image holds (Python distributions, Debian packages) as JSON "
        "('-': stdout) and run no gate",
    )
    p.add_argument("--nonce", metavar="HEX", help="the caller's nonce for this run (32 to 64 hex digits)")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also list every allowed pip-check line with the rule that allowed it and the rule's reason",
    )
    return p


def config_from_args(args: argparse.Namespace) -> GateConfig:
    """The config file (if any) plus everything the flags add."""
    cfg = load_config(args.config) if args.config else GateConfig()
    cfg.merge_flags(args)
    return cfg


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _inventory_mode(args: argparse.Namespace) -> int:
    """``--inventory-json FILE|-``: the inventory, nothing else; with a gate, a report or a config it is bad usage
    (one command, one meaning)."""
    try:
        asked = config_from_args(argparse.Namespace(**dict(vars(args), config=None)))
    except ConfigError as exc:
        sys.stderr.write("verify: error: %s\n" % exc)
        return EXIT_USAGE
    others = [args.config, args.json, args.json_line, args.junit, args.nonce, args.verbose]
    if not asked.is_empty() or any(others):
        sys.stderr.write("verify: error: --inventory-json runs no gate: give it alone\n")
        return EXIT_USAGE
    try:
        inventory.write_inventory(args.inventory_json)
    except OSError as exc:
        sys.stderr.write("verify: error: cannot write %s: %s\n" % (args.inventory_json, exc.strerror or exc))
        return EXIT_USAGE
    return EXIT_OK


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    found = report.interpreter()
    problem = report.interpreter_problem(found)
    if problem is not None:  # before any gate: a report from another interpreter would judge another image
        sys.stderr.write("verify: error: the gate runner %s (%s)\n" % (problem, found.get("executable")))
        return EXIT_FAILED
    if args.inventory_json is not None:
        return _inventory_mode(args)
    if args.nonce is not None and not report.NONCE_RE.fullmatch(args.nonce):
        sys.stderr.write("verify: error: --nonce must be 32 to 64 lower-case hex digits\n")
        return EXIT_USAGE
    try:
        gpu_required()  # the environment is read before any check starts: a bad value is bad usage
        cfg = config_from_args(args)
    except (ConfigError, BadEnvironment) as exc:
        sys.stderr.write("verify: error: %s\n" % exc)
        return EXIT_USAGE
    if cfg.is_empty():
        sys.stderr.write("verify: error: nothing to check: give --config or at least one check flag\n")
        return EXIT_USAGE
    streamed = "-" in args.json
    console = sys.stderr if streamed else sys.stdout

    def show(res):
        print(report.line(res), file=console, flush=True)

    results = run_checks(cfg, on_result=show)
    if args.verbose:
        for text in report.allowed_lines([report.check_dict(r) for r in results]):
            print(text, file=console, flush=True)
    files = [path for path in args.json if path != "-"] + ([args.json_line] if args.json_line else [])
    writers = [(path, lambda r, p: report.write_json(r, p, args.nonce)) for path in args.json if path != "-"]
    writers.append((args.json_line, lambda r, p: _write_text(p, report.kept_line(r, nonce=args.nonce))))
    writers.append((args.junit, report.write_junit))
    for path, writer in writers:
        if path:
            try:
                writer(results, path)
            except OSError as exc:
                print(report.summary(results), file=console, flush=True)
                sys.stderr.write("verify: error: cannot write %s: %s\n" % (path, exc.strerror or exc))
                return EXIT_USAGE
    # The summary names the JSON report written (the first one asked for), once it is there.
    print(report.summary(results, os.path.abspath(files[0]) if files else None), file=console, flush=True)
    if streamed:
        sys.stdout.write(report.stream_line(results, nonce=args.nonce))
        sys.stdout.flush()
    return EXIT_FAILED if any(r.failed for r in results) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
