"""The one reading of a boolean and of a whole number, for every environment variable and option the toolkit takes.

A boolean is one of `1`, `true`, `yes` or `0`, `false`, `no`, in any case of ASCII letters and nothing around it
(no space, no sign); unset or empty means the default. A whole number is ASCII digits only (Python's int() also
takes `١٢`, `1_0`, ` 12`, `+12` and refuses `²` with a traceback: none of them is read here), at most MAX_DIGITS
of them, from its minimum to its documented maximum. Anything else is a UsageError naming the variable or option
(exit 2), before anything runs.

verify/ runs inside images and imports none of the toolkit: `verify/env_flag.py` holds its own copy of the boolean
rule (tests/unit/test_strict_values.py keeps the two the same).
"""

from __future__ import annotations

import argparse
import os

from toolkit.errors import UsageError, short

TRUE_WORDS = ("1", "true", "yes")
FALSE_WORDS = ("0", "false", "no")
MAX_DIGITS = 18  # any whole number the toolkit takes fits in a C long long, and int() never sees a huge string
MAX_SECONDS = 86_400  # a day: the longest any timeout the toolkit reads may be


def boolean(text: str) -> bool | None:
    """True or False for a boolean word (module docstring), None for anything else."""
    if not isinstance(text, str) or not text.isascii():
        return None
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def whole(text: str, minimum: int, maximum: int) -> int | None:
    """The whole number `text` spells in ASCII digits, when it lies in [minimum, maximum]; None otherwise."""
    if not isinstance(text, str) or not (0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if minimum <= value <= maximum else None


def expected_boolean() -> str:
    return f"expected one of {', '.join(TRUE_WORDS)} or {', '.join(FALSE_WORDS)}"


def env_flag(name: str, default: bool = False, environ=None) -> bool:
    """A boolean environment variable: the default when unset or empty, else a boolean word (UsageError)."""
    text = (os.environ if environ is None else environ).get(name, "")
    if text == "":
        return default
    value = boolean(text)
    if value is None:
        raise UsageError(f"{name}={short(text)}: {expected_boolean()}")
    return value


def env_whole(name: str, default: int, maximum: int, minimum: int = 1, unit: str = "", environ=None) -> int:
    """A whole-number environment variable: the default when unset or empty, else minimum..maximum (UsageError)."""
    text = (os.environ if environ is None else environ).get(name, "")
    if text == "":
        return default
    value = whole(text, minimum, maximum)
    if value is None:
        unit = f" {unit}" if unit else ""
        raise UsageError(f"{name}={short(text)}: expected a whole number{unit} from {minimum} to {maximum}")
    return value


def option_whole(minimum: int, maximum: int, unit: str = ""):
    """An argparse `type` reading a whole number as `whole` does (argparse names the option in its error)."""

    def parse(text: str) -> int:
        value = whole(text, minimum, maximum)
        if value is None:
            unit_ = f" {unit}" if unit else ""
            raise argparse.ArgumentTypeError(
                f"{short(text)}: expected a whole number{unit_} from {minimum} to {maximum}"
            )
        return value

    parse.__name__ = "whole number"
    return parse
