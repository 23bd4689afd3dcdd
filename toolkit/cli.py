"""The command-line entry points' one argparse rule: a usage error is exit 2 (argparse has printed its line), `--help`
is exit 0, and neither raises SystemExit out of a `main()` that tests call in-process. (ci/changed_images.py keeps
its own two lines: it runs as a plain script beside other revisions of the toolkit and imports none of it.)"""

from __future__ import annotations

import argparse


def parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code to return at once."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
