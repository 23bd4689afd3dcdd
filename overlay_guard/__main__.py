"""``python3 -m overlay_guard [--tree-root PREFIX] PATH...``: a finding a line; exit 1 on any, 0 clean, 2 bad usage."""

from __future__ import annotations

import argparse
import sys

from .files import lint_paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m overlay_guard", description="Overlay guard: unsafe patches and unsafe patch steps."
    )
    parser.add_argument(
        "--tree-root",
        metavar="PREFIX",
        help="every path a patch touches must lie under this prefix (after dropping a/ and b/)",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="patch files, build files or directories")
    args = parser.parse_args(argv)
    try:
        findings = lint_paths(args.paths, args.tree_root)
    except OSError as exc:
        sys.stderr.write("overlay_guard: error: %s\n" % exc)
        return 2
    for f in findings:
        print(f)
    sys.stderr.write("overlay_guard: %d finding(s)\n" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
