"""Scan build steps (Dockerfiles, Jinja2 templates, shell scripts, Makefiles, YAML) for unsafe patch application.

Rules (each finding is ``FILE:LINE rule: message``):

- ``unidiff-zero``: any use of ``--unidiff-zero``; it lets zero-context hunks apply by line number alone.
- ``3way-unpinned``: ``git apply --3way``/``-3`` is allowed only after the same file pinned its base: an earlier
  ``git checkout|switch --detach|reset --hard REF``, or an assertion ``test "$(git rev-parse HEAD)" = REF``
  (``[ ... ]``/``==`` too), where REF is a full 40/64-hex commit id, a variable
  whose only assignment in the file (ARG/ENV/shell/make/YAML) is such an id, or, in a ``.j2`` template, a
  ``{{ expression }}`` (the rendered Dockerfile is scanned again with the real value). Without the patch's
  pre-image blobs in the clone the 3-way fallback silently degrades (docs/architecture.md, "Why gates").
- ``patch-no-dry-run``: ``patch`` that applies without an earlier ``patch --dry-run`` of the same input.
- ``apply-no-check``: ``git apply`` that applies without an earlier ``git apply --check`` of the same patch.
- ``or-true``: ``|| true``, ``|| :`` or ``|| exit 0`` after a patch/git apply step in the same and/or chain,
  and make's ``-`` recipe prefix on such a step: a failed patch must fail the build.

Comment lines are not scanned. "Earlier" means earlier in the same file, in reading order.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass

_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_OPS = {";", "&&", "||", "|", "&", ";;", "|&", "\n"}
_IGNORED = {"(", ")", "{", "}"}
_PREFIX_WORDS = {
    "then",
    "do",
    "else",
    "elif",
    "if",
    "while",
    "until",
    "!",
    "time",
    "exec",
    "sudo",
    "env",
    "nice",
    "command",
    "nohup",
    "xargs",
}
_DOCKER_INSTR = {
    "FROM",
    "COPY",
    "ADD",
    "ENV",
    "ARG",
    "LABEL",
    "WORKDIR",
    "USER",
    "EXPOSE",
    "VOLUME",
    "ENTRYPOINT",
    "CMD",
    "SHELL",
    "HEALTHCHECK",
    "ONBUILD",
    "STOPSIGNAL",
    "MAINTAINER",
}
_J2_EXPR = re.compile(r"\{\{.*?\}\}", re.S)
_J2_HIDE = re.compile(r"\{#.*?#\}|\{%.*?%\}", re.S)
_VAR_REF = re.compile(r"^\$\{?\(?([A-Za-z_]\w*)\)?\}?$")


@dataclass
class StepFinding:
    line: int
    rule: str
    message: str


@dataclass
class _Cmd:
    words: list[str]
    stdin: str | None
    op_after: str
    ignore_errors: bool = False  # make's '-' prefix


def file_kind(path: str) -> str | None:
    """dockerfile | shell | make | yaml for names the guard scans, else None."""
    name = os.path.basename(path)
    low = name.lower()
    if low.endswith(".j2"):
        return "dockerfile"
    if low.startswith("dockerfile") or low.endswith(".dockerfile"):
        return "dockerfile"
    if low.endswith((".sh", ".bash")):
        return "shell"
    if name in ("Makefile", "makefile", "GNUmakefile") or low.endswith(".mk"):
        return "make"
    if low.endswith((".yml", ".yaml")):
        return "yaml"
    return None


def _blank_out(match: re.Match[str]) -> str:
    return "\n" * match.group(0).count("\n")


def _logical_lines(text: str, kind: str) -> list[tuple[int, str, bool]]:
    """(first line number, joined text, is_make_recipe) with continuations joined and comment lines dropped."""
    out: list[tuple[int, str, bool]] = []
    buf: list[str] = []
    start = 0
    recipe = False
    for no, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if not buf:
            if not stripped or stripped.startswith("#"):
                continue
            start, recipe = no, kind == "make" and line.startswith("\t")
            if kind == "yaml":
                line = re.sub(r"^\s*(-\s+)?([A-Za-z_][\w.-]*:\s+)?", "", line)
                if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
                    line = line[1:-1]
        elif (stripped.startswith("#") or not stripped) and kind in ("dockerfile", "make"):
            continue  # comment and empty lines inside a continued RUN/recipe are dropped by those tools
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        if kind == "shell" and re.search(r"(&&|\|\||\|)\s*$", line):
            buf.append(line)
            continue
        buf.append(line)
        out.append((start, " ".join(buf), recipe))
        buf = []
    if buf:
        out.append((start, " ".join(buf), recipe))
    return out


def _tokens(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # unbalanced quotes (prose in an echo, a template fragment): fall back to a crude split
        return re.findall(r"&&|\|\||[;|&()<>]|[^\s;|&()<>]+", text)


def _commands(tokens: list[str]) -> list[_Cmd]:
    cmds: list[_Cmd] = []
    words: list[str] = []
    stdin: str | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _OPS:
            if words:
                cmds.append(_Cmd(words, stdin, tok))
            elif cmds and tok in ("&&", "||", "|"):
                cmds[-1].op_after = tok  # `( a ) || true`: the operator applies to what came before
            words, stdin = [], None
        elif tok in _IGNORED:
            pass
        elif re.match(r"^\d*(<|<<<|>|>>|>&|&>|<&|>\|)$", tok):
            if i + 1 < len(tokens) and tok.lstrip("0123456789") == "<":
                stdin = tokens[i + 1]
            i += 1
        else:
            words.append(tok)
        i += 1
    if words:
        cmds.append(_Cmd(words, stdin, ""))
    return cmds


def _strip_prefixes(cmd: _Cmd, recipe: bool) -> list[str]:
    words = list(cmd.words)
    if recipe and words:
        head = words[0].lstrip("@+")
        if head.startswith("-"):
            cmd.ignore_errors = True
        words[0] = head.lstrip("-@+")
        if not words[0]:
            words = words[1:]
    while words:
        w = words[0]
        if w in _PREFIX_WORDS or re.match(r"^[A-Za-z_]\w*=", w):
            words = words[1:]
            while words and w in ("sudo", "env", "nice") and words[0].startswith("-"):
                words = words[1:]
            continue
        break
    return words


def _git_subcommand(words: list[str]) -> tuple[str | None, list[str]]:
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif w.startswith("-"):
            i += 1
        else:
            return w, words[i + 1 :]
    return None, []


def _positionals(args: list[str]) -> set[str]:
    return {a for a in args if not a.startswith("-")}


def _patch_inputs(args: list[str], stdin: str | None) -> set[str]:
    inputs = set()
    for i, a in enumerate(args):
        if a in ("-i", "--input") and i + 1 < len(args):
            inputs.add(args[i + 1])
        elif a.startswith("--input="):
            inputs.add(a.split("=", 1)[1])
        elif a.startswith("-i") and len(a) > 2 and not a.startswith("--"):
            inputs.add(a[2:])
    if stdin:
        inputs.add(stdin)
    return inputs


def _same_input(a: set[str], b: set[str]) -> bool:
    return not a or not b or bool(a & b)


def _pinned_vars(text: str) -> set[str]:
    """Variables whose every assignment in the file is a full commit id."""
    values: dict[str, set[str]] = {}
    pattern = re.compile(
        r"(?:^|[\s;&|])(?:ARG\s+|ENV\s+|export\s+)?([A-Za-z_]\w*)\s*"
        r"(?:[:?]?=|:\s+|\s+(?=[0-9a-f]{40}))\s*[\"']?([^\s\"';&|]*)",
        re.M,
    )
    for name, value in pattern.findall(text):
        values.setdefault(name, set()).add(value)
    return {n for n, vals in values.items() if vals and all(_SHA.match(v) for v in vals)}


class _State:
    def __init__(self, pinned_vars: set[str], templated: bool):
        self.pinned_vars = pinned_vars
        self.templated = templated
        self.pinned = False
        self.patch_dry: list[set[str]] = []
        self.apply_checked: list[set[str]] = []

    def is_pinned_ref(self, ref: str) -> bool:
        if _SHA.match(ref):
            return True
        if self.templated and "__J2EXPR" in ref:
            return True
        m = _VAR_REF.match(ref)
        return bool(m and m.group(1) in self.pinned_vars)


def _note_pin(sub: str, args: list[str], state: _State) -> None:
    refs = _positionals(args)
    if sub == "checkout" or (sub == "switch" and "--detach" in args) or (sub == "reset" and "--hard" in args):
        if any(state.is_pinned_ref(r) for r in refs):
            state.pinned = True


_HEAD_ASSERT = re.compile(r"rev-parse\s+(?:--verify\s+)?HEAD[^=]*?\s==?\s+[\"']?([^\s\"';&|\]]+)")


def _scan_line(line_no: int, text: str, recipe: bool, state: _State) -> list[StepFinding]:
    found: list[StepFinding] = []
    if any(state.is_pinned_ref(ref) for ref in _HEAD_ASSERT.findall(text)):
        state.pinned = True  # test "$(git rev-parse HEAD)" = <pinned ref>
    tokens = _tokens(text)
    if any("--unidiff-zero" in t for t in tokens):
        found.append(
            StepFinding(
                line_no,
                "unidiff-zero",
                "--unidiff-zero lets zero-context hunks apply by line "
                "number alone; generate patches with context and drop the flag",
            )
        )
    cmds = _commands(tokens)
    for k, cmd in enumerate(cmds):
        words = _strip_prefixes(cmd, recipe)
        if not words:
            continue
        name = os.path.basename(words[0])
        step = None
        if name in ("sh", "bash", "dash", "ash", "zsh"):
            opt = next((i for i, w in enumerate(words[1:-1], 1) if re.match(r"^-[a-zA-Z]*c[a-zA-Z]*$", w)), None)
            if opt is not None:  # `sh -c SCRIPT`, `bash -ec SCRIPT`: scan the script string too
                found.extend(_scan_line(line_no, words[opt + 1], False, state))
                continue
        if name == "git":
            sub, args = _git_subcommand(words)
            if sub in ("checkout", "switch", "reset"):
                _note_pin(sub, args, state)
            if sub == "apply":
                step = "git apply"
                inputs = _positionals(args)
                checking = bool({"--check", "--stat", "--numstat", "--summary"} & set(args))
                if "--3way" in args or "-3" in args:
                    if not state.pinned:
                        found.append(
                            StepFinding(
                                line_no,
                                "3way-unpinned",
                                "git apply --3way without an earlier "
                                "checkout of a pinned commit: the pre-image blobs may be missing",
                            )
                        )
                if checking:
                    state.apply_checked.append(inputs)
                elif not any(_same_input(inputs, seen) for seen in state.apply_checked):
                    shown = " ".join(sorted(inputs)) or "(stdin)"
                    found.append(
                        StepFinding(
                            line_no,
                            "apply-no-check",
                            "git apply %s without an earlier `git apply --check` of it" % shown,
                        )
                    )
        elif name == "patch":
            step = "patch"
            args = words[1:]
            inputs = _patch_inputs(args, cmd.stdin)
            if "--dry-run" in args or "--check" in args:
                state.patch_dry.append(inputs)
            elif not any(_same_input(inputs, seen) for seen in state.patch_dry):
                shown = " ".join(sorted(inputs)) or "(stdin)"
                found.append(
                    StepFinding(
                        line_no, "patch-no-dry-run", "patch %s without an earlier `patch --dry-run` of it" % shown
                    )
                )
        if step is None:
            continue
        if cmd.ignore_errors:
            found.append(StepFinding(line_no, "or-true", "make's '-' prefix ignores a failed %s" % step))
        j = k
        while j < len(cmds) - 1 and cmds[j].op_after in ("&&", "||", "|"):
            nxt = _strip_prefixes(_Cmd(list(cmds[j + 1].words), None, ""), False)
            if cmds[j].op_after == "||" and (nxt in (["true"], [":"], ["/bin/true"]) or nxt[:2] == ["exit", "0"]):
                found.append(
                    StepFinding(line_no, "or-true", "'|| %s' after %s hides a failed patch" % (" ".join(nxt), step))
                )
                break
            j += 1
    return found


def scan_text(text: str, kind: str, templated: bool = False) -> list[StepFinding]:
    """Scan one file's text; ``kind`` from file_kind(); ``templated`` for Jinja2 sources."""
    if templated:
        exprs: dict[str, str] = {}

        def placeholder(m: re.Match[str]) -> str:
            key = exprs.setdefault(" ".join(m.group(0).split()), "__J2EXPR%d__" % len(exprs))
            return key + "\n" * m.group(0).count("\n")

        text = _J2_EXPR.sub(placeholder, _J2_HIDE.sub(_blank_out, text))
    state = _State(_pinned_vars(text), templated)
    found: list[StepFinding] = []
    for line_no, logical, recipe in _logical_lines(text, kind):
        if kind == "make" and not recipe:
            continue
        if kind == "dockerfile":
            m = re.match(r"^\s*([A-Za-z]+)\b\s*(.*)$", logical)
            if m and m.group(1).upper() in _DOCKER_INSTR:
                if "--unidiff-zero" in logical:
                    found.extend(_scan_line(line_no, m.group(2), False, state)[:1])
                continue
            if m and m.group(1).upper() == "RUN":
                logical = re.sub(r"^(--\S+\s+)*", "", m.group(2))
                if logical.startswith("["):
                    try:
                        logical = " ".join(shlex.quote(str(w)) for w in json.loads(logical))
                    except ValueError:
                        pass
        if kind == "make":
            logical = logical.replace("$$", "$")
        found.extend(_scan_line(line_no, logical, recipe, state))
    return found
