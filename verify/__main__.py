"""``python -m verify``: the gate runner CLI. Exit 0 when every check passed, 1 when one failed, 2 on bad usage."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import report
from .config import PLATFORMS, ConfigError, GateConfig, load_config, parse_provenance_arg, parse_signature_arg
from .runner import run_checks

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        sys.stderr.write("verify: error: %s (see python -m verify --help)\n" % message)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m verify", description="Import gates run inside an image with its own python.")
    p.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE", help="import MODULE for real"
    )
    p.add_argument(
        "--compile",
        action="append",
        default=[],
        metavar="PACKAGE_OR_DIR",
        help="byte-compile every .py of a package (located without importing) or directory, in memory",
    )
    p.add_argument(
        "--signature",
        action="append",
        default=[],
        metavar="MODULE:ATTR[=KW1,KW2,...]",
        help="ATTR exists, is callable and binds the given keywords (imports MODULE)",
    )
    p.add_argument(
        "--signature-source",
        action="append",
        default=[],
        metavar="MODULE:ATTR[=KW1,KW2,...]",
        help="like --signature, but read from the module's source with ast, never importing it",
    )
    p.add_argument(
        "--platform",
        choices=PLATFORMS,
        help="rocm: torch.version.hip and no nvidia-*-cu* wheel; cuda: torch.version.cuda; cpu: no requirement",
    )
    p.add_argument("--pip-check", action="store_true", help="pip check must be clean (config may allow lines)")
    p.add_argument(
        "--provenance",
        action="append",
        default=[],
        metavar="PKG=LOCATION",
        help="PKG must resolve from LOCATION: site-packages or an absolute directory",
    )
    p.add_argument("--config", metavar="FILE", help="JSON gate config; flags add to it")
    p.add_argument("--json", metavar="FILE", help="write a JSON report")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    return p


def config_from_args(args: argparse.Namespace) -> GateConfig:
    """The config file (if any) plus everything the flags add."""
    cfg = load_config(args.config) if args.config else GateConfig()
    cfg.imports += args.imports
    cfg.compile += args.compile
    cfg.signatures += [parse_signature_arg(s, use_import=True) for s in args.signature]
    cfg.signatures += [parse_signature_arg(s, use_import=False) for s in args.signature_source]
    if args.platform:
        cfg.platform = args.platform
    if args.pip_check and cfg.pip_check is None:
        cfg.pip_check = []
    for text in args.provenance:
        cfg.provenance.update(parse_provenance_arg(text))
    return cfg


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        sys.stderr.write("verify: error: %s\n" % exc)
        return EXIT_USAGE
    if cfg.is_empty():
        sys.stderr.write("verify: error: nothing to check: give --config or at least one check flag\n")
        return EXIT_USAGE

    def show(res):
        print(report.line(res), flush=True)

    results = run_checks(cfg, on_result=show)
    print(report.summary(results), flush=True)
    for path, writer in ((args.json, report.write_json), (args.junit, report.write_junit)):
        if path:
            try:
                writer(results, path)
            except OSError as exc:
                sys.stderr.write("verify: error: cannot write %s: %s\n" % (path, exc.strerror or exc))
                return EXIT_USAGE
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
