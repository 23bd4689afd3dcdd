"""The command-line entry points' one argparse rule: a usage error is exit 2 (argparse has printed its line), `--help`
is exit 0, and neither raises SystemExit out of a `main()` that tests call in-process. (ci/changed_images.py keeps
its own two lines: it runs as a plain script beside other revisions of the toolkit and imports none of it.)"""

from __future__ import annotations

import argparse


def empty_option(args: argparse.Namespace, skip=("command", "paths")) -> str | None:
    """The first option given an empty value (`--registry ""`), or None: an empty value never means "not given"
    (`--registry "" --push` would push to Docker Hub), so it is refused like any other bad value."""
    for dest, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if dest not in skip and any(isinstance(v, str) and not v.strip() for v in values):
            return "--" + dest.replace("_", "-")
    return None


def parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code to return at once."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
