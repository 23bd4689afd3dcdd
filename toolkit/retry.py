"""Bounded retries of idempotent registry calls (a manifest lookup, a push): a registry answers a 5xx or drops the
connection now and then, a fresh one especially under concurrent pushes, and the same call a moment later works.
Only failures that say so are retried (TRANSIENT_RE), at most ATTEMPTS times with doubling pauses; anything else,
and the last failure, reaches the caller as it was."""

from __future__ import annotations

import re
import time

ATTEMPTS = 4
FIRST_PAUSE = 0.5  # seconds; then 1 and 2: at most 3.5 s of waiting in all
TRANSIENT_RE = re.compile(
    r"\b(50[0-4]|429)\b|internal server error|bad gateway|service unavailable|gateway timeout|too many requests"
    r"|connection (reset|refused|closed)|broken pipe|unexpected EOF|\bEOF\b",
    re.IGNORECASE,
)


def transient(message: str) -> bool:
    """Whether a registry failure's text says it may pass by itself (a 5xx, 429, a dropped connection)."""
    return TRANSIENT_RE.search(message) is not None


def retried(call, is_transient, log=None, what: str = "registry call", sleep=time.sleep):
    """`call()`, again after a pause while it raises an exception `is_transient(exc)` accepts, at most ATTEMPTS
    times in all; `log` (optional) hears of each retry."""
    pause = FIRST_PAUSE
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except Exception as e:
            if attempt == ATTEMPTS or not is_transient(e):
                raise
            if log is not None:
                log(f"note: {what} failed ({str(e)[:160]}); retrying in {pause:g}s ({attempt}/{ATTEMPTS - 1})")
            sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
