"""The command-line entry points' one argparse rule: a usage error is exit 2 with one line on stderr, `--help` is
exit 0, and neither raises SystemExit out of a `main()` that tests call in-process. An option that takes one value
given twice (`--target a --target b`, `-o x --output y`) is a usage error naming it, never "the last one wins".
(ci/changed_images.py keeps its own two lines: it runs as a plain script beside other revisions of the toolkit and
imports none of it.)"""

from __future__ import annotations

import argparse
import sys


class _OneLine(Exception):
    """argparse's error, carried out of parse_args as one line."""


class _StoreOnce(argparse._StoreAction):
    """A single-valued option: a second occurrence is an error naming the option, not a silent override."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = _GIVEN[-1] if _GIVEN else None
        if given is not None:
            if self.dest in given:
                names = "/".join(self.option_strings)
                raise _OneLine(f"{names}: given twice; it takes one value (give it once)")
            given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


_GIVEN: list[set] = []  # the options seen by the parse now running (a stack: one set per parse call)


def _raise(message: str):
    raise _OneLine(message)


def _parsers(parser: argparse.ArgumentParser):
    """The parser and every subparser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


def strict(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` (and its subparsers) with single-valued options refused twice and errors as one line."""
    for p in _parsers(parser):
        p.error = _raise  # one line, raised to parse(), not usage + SystemExit
        for action in p._actions:
            if type(action) is argparse._StoreAction and action.option_strings:
                action.__class__ = _StoreOnce
    return parser


def empty_option(args: argparse.Namespace, skip=("command", "paths")) -> str | None:
    """The first option given an empty value (`--registry ""`), or None: an empty value never means "not given"
    (`--registry "" --push` would push to Docker Hub), so it is refused like any other bad value."""
    for dest, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        if dest not in skip and any(isinstance(v, str) and not v.strip() for v in values):
            return "--" + dest.replace("_", "-")
    return None


def parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code to return at once (2 after one line on stderr, 0 after --help)."""
    strict(parser)
    _GIVEN.append(set())
    try:
        return parser.parse_args(argv)
    except _OneLine as e:
        message = str(e).replace("\n", " ")
        print(f"{parser.prog}: error: {message} (see {parser.prog} --help)", file=sys.stderr)
        return 2
    except SystemExit as e:
        return 2 if e.code else 0
    finally:
        _GIVEN.pop()
