"""JSON the tool reads from outside (a lock, upstream's release lock, a releases-API answer), bounded before it is
parsed: at most a given number of bytes (read with a cap, so an endless file or stream stops there), at most
MAX_DEPTH levels of nesting, and numbers of at most MAX_NUMBER_DIGITS digits. Anything else is one ValueError line
the caller turns into its own error (exit 2 for a file, exit 3 for a remote answer)."""

from __future__ import annotations

import json
import os
import re
import stat

MAX_DEPTH = 64  # a lock nests 5 levels, a releases-API answer 4
MAX_NUMBER_DIGITS = 30  # sizes and ids; Python refuses more than 4,300 digits with another error
_NUMBER_RE = re.compile(r"-?[0-9]{%d,}" % (MAX_NUMBER_DIGITS + 1))


class BadJson(ValueError):
    """JSON that is too large, too deep, has a too long number, or does not parse; the message is one line."""


def read_capped(stream, max_bytes: int) -> bytes:
    """At most `max_bytes` bytes of `stream`; BadJson when it holds more."""
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadJson(f"larger than {max_bytes} bytes")
    return data


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings."""
    deepest = depth = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def parse(data: bytes) -> object:
    """The JSON value of `data` (UTF-8), within the depth and number caps."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadJson("not UTF-8 text") from None
    if _depth(text) > MAX_DEPTH:
        raise BadJson(f"nested deeper than {MAX_DEPTH} levels")
    if _NUMBER_RE.search(re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)):
        raise BadJson(f"a number of more than {MAX_NUMBER_DIGITS} digits")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadJson(f"line {e.lineno}: not JSON: {e.msg}") from None
    except (ValueError, RecursionError) as e:
        raise BadJson(f"not JSON: {type(e).__name__}") from None


def load_file(path, max_bytes: int) -> object:
    """The JSON value of the regular file at `path` (read with the cap; a FIFO or a device is refused before it is
    opened); OSError passes through for the caller to word."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise BadJson("not a regular file")
    with open(path, "rb") as f:
        return parse(read_capped(f, max_bytes))
