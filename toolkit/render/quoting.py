"""Values as Dockerfile data: `dockerfile_quote` for ENV/LABEL/ARG values, `shell_quote` for words of RUN lines,
`json_words` for the exec form of ADD, and the `${NAME}`-aware `shell_word`/`dockerfile_word`. Every one passes its
value through `plain` first, in its final form: a value no quoting can hold on one line (a control character) is
refused there, whatever validation it slipped past."""

from __future__ import annotations

import json
import re
import shlex

from toolkit.errors import UsageError
from toolkit.spec.values import text_problem
from toolkit.steps.base import ARG_REF_RE


def plain(value) -> str:
    """`value` as text that can stand on one Dockerfile line, or UsageError: every quoting filter starts here."""
    text = str(value)
    problem = text_problem(text)
    if problem:
        raise UsageError(f"a value for the Dockerfile: {problem}; refusing to render")
    return text


def dockerfile_quote(value) -> str:
    """A double-quoted Dockerfile word (ENV, LABEL, ARG values): `\\`, `"` and `$` escaped, so the value is taken
    literally, with no variable expansion and no way to end the word or the instruction."""
    text = plain(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{text}"'


def shell_quote(value) -> str:
    """One shell word for a RUN line (bash): the value is an argument, never shell syntax."""
    return shlex.quote(plain(value))


def json_words(values) -> str:
    """The exec form of an instruction (`ADD ["src", "dest"]`): a JSON list of plain words."""
    return json.dumps([plain(v) for v in values])


def _pieces(value, args) -> list:
    """`value` split into literal text and `${NAME}` references to declared build args (str, or ("arg", NAME))."""
    out, pos, text = [], 0, plain(value)
    for m in ARG_REF_RE.finditer(text):
        if m.group(1) in args:
            out += [text[pos : m.start()], ("arg", m.group(1))]
            pos = m.end()
    return [*out, text[pos:]]


def shell_word(value, args) -> str:
    """One shell word in which each `${NAME}` of a declared build arg is expanded by the shell (as `"${NAME}"`)
    and every other character is literal."""
    parts = [f'"${{{p[1]}}}"' if isinstance(p, tuple) else (shlex.quote(p) if p else "") for p in _pieces(value, args)]
    word = "".join(parts)
    return word or "''"


def dockerfile_word(value, args) -> str:
    """A double-quoted Dockerfile word (ENV values) in which each `${NAME}` of a declared build arg is expanded by
    the Dockerfile and every other character is literal (`dq`'s escaping)."""
    parts = [f"${{{p[1]}}}" if isinstance(p, tuple) else dockerfile_quote(p)[1:-1] for p in _pieces(value, args)]
    return '"' + "".join(parts) + '"'


def shell_glob(value) -> str:
    """A path pattern as one shell word: `*` stays a glob, every other character is quoted."""
    return "*".join(shlex.quote(part) if part else "" for part in plain(value).split("*"))


def hash_option(sha: str) -> str:
    """pip's `--hash` option for a sha256 hex digest (anything else is refused)."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ValueError(f"not a sha256 hex: {sha!r}")
    return f" --hash=sha256:{sha}"
