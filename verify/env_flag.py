"""The runner's reading of a boolean environment variable (``MILES_GATES_REQUIRE_GPU``): a copy of the toolkit's
rule (toolkit/strict.py), since verify/ runs inside images and imports none of the toolkit. A boolean is one of
``1``, ``true``, ``yes`` or ``0``, ``false``, ``no``, in any case of ASCII letters and nothing around it; unset or
empty is the default; anything else is a BadEnvironment naming the variable (the runner's exit 2).
tests/unit/test_strict_values.py keeps the two rules the same."""

from __future__ import annotations

import os
from typing import Mapping, Optional


class BadEnvironment(ValueError):
    """An environment variable the runner reads holds no value it takes; the message is one line naming it."""


TRUE_WORDS = ("1", "true", "yes")
FALSE_WORDS = ("0", "false", "no")
REQUIRE_GPU = "MILES_GATES_REQUIRE_GPU"


def boolean(text: str) -> Optional[bool]:
    """True or False for a boolean word, None for anything else."""
    if not isinstance(text, str) or not text.isascii():
        return None
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def env_flag(name: str, default: bool = False, environ: Optional[Mapping[str, str]] = None) -> bool:
    text = (os.environ if environ is None else environ).get(name, "")
    if text == "":
        return default
    value = boolean(text)
    if value is None:
        shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
        raise BadEnvironment(
            "%s=%s: expected one of %s or %s" % (name, shown, ", ".join(TRUE_WORDS), ", ".join(FALSE_WORDS))
        )
    return value


def gpu_required() -> bool:
    """Whether a GPU gate without a driver fails (``MILES_GATES_REQUIRE_GPU`` true) rather than reports not run."""
    return env_flag(REQUIRE_GPU)
