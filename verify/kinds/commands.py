"""command: an argv, run without a shell, exits 0 (``{python}`` = the image's interpreter).

A command gate is an argv, not a shell line, and what it may run is one rule, ``gate_argv_problem``: without a
``shell`` key the argv is the image's Python on a script file or a module outside the standard library
(``{python} probes/x.py ...``, ``{python} -m pytest ...``), so no program that starts a shell or another program
(``sh``, ``busybox``, ``env``, ``nice``, ``timeout``, ``xargs``, ``python -c``, ...) can stand in for the check:
anything else is refused, with no list of what to refuse. An argv that runs a shell needs a ``shell`` key saying
why; its script is then read for the ways a shell hides a failure (``||`` fallbacks, ``;`` or newline chains
without ``set -e``, an ``&&`` list that ``set -e`` ignores, pipes without ``set -o pipefail``, background jobs,
``!``, ``set +e``, traps, an exit status that wraps to 0), no command in it may start another shell or Python, and
an argv or a script that only runs commands that always succeed is refused: such a gate cannot fail. The runner
enforces each gate's timeout itself, on the gate's whole process group.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..result import CheckResult
from .base import Check, Gate, RunnerTest, config_error, short

if TYPE_CHECKING:
    from ..config import GateConfig

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "csh", "tcsh"}
ALWAYS_SUCCEED = {"true", ":", "echo", "printf", "yes"}
COMMAND_KEYS = ("name", "argv", "timeout", "shell")
MAX_TIMEOUT = 86400  # seconds (a day): the longest a gate command may run, as the toolkit's other timeouts
# The shell's compound commands and groupings: inside them `set -e` does not apply, or a status is replaced.
GRAMMAR = {
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "while",
    "until",
    "do",
    "done",
    "for",
    "case",
    "esac",
    "function",
    "select",
    "[[",
    "coproc",
    "time",
}
PYTHON = "{python}"  # the image's interpreter, as a gate's argv names it
SCRIPT_RE = re.compile(r"[A-Za-z0-9_./+-]+\.py")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# The interpreter's own modules (`-m runpy`, `-m trace`, `-m timeit`, `-m code`): programs that run other code or
# always succeed, never a check of the image. (Python 3.10 and later name them; older runners judge the spec's
# argv only after the toolkit did, on the host.)
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


@dataclass
class CommandSpec:
    name: str
    argv: List[str]
    timeout: float = 600.0
    shell: Optional[str] = None  # why this gate runs a shell (an argv runs without one by default)


def _split_script(script: str) -> List[Tuple[str, str]]:
    """[(operator before it, command text)] at the top level of a shell script; quotes and escapes respected,
    comments dropped. Enough to see how commands are chained, not a shell parser."""
    out: List[Tuple[str, str]] = []
    op, buf, quote, i = "", [], "", 0
    while i < len(script):
        c = script[i]
        if quote:
            buf.append(c)
            if c == "\\" and quote == '"' and i + 1 < len(script):
                buf.append(script[i + 1])
                i += 1
            elif c == quote:
                quote = ""
        elif c == "\\" and i + 1 < len(script):
            buf.append(script[i : i + 2])
            i += 1
        elif c in "'\"":
            quote = c
            buf.append(c)
        elif c == "#" and (not buf or buf[-1].isspace()):
            while i + 1 < len(script) and script[i + 1] != "\n":
                i += 1
        elif c == "&" and ((buf and buf[-1] in "<>") or script[i + 1 : i + 2] == ">"):
            buf.append(c)  # a redirection (2>&1, &>file), not an operator
        elif script.startswith(("||", "&&"), i) or c in ";\n|&":
            sep = script[i : i + 2] if script.startswith(("||", "&&"), i) else c
            i += len(sep) - 1
            if "".join(buf).strip():
                out.append((op, "".join(buf).strip()))
                op = sep
            elif sep != "\n":
                op = sep  # an operator after nothing (a leading `;`) still chains
            buf = []
        else:
            buf.append(c)
        i += 1
    if "".join(buf).strip():
        out.append((op, "".join(buf).strip()))
    elif op == "&":
        out.append((op, ""))  # a trailing `&`: the last command runs in the background
    return out


def _always_succeeds(words: List[str]) -> bool:
    if not words:
        return True
    prog = os.path.basename(words[0])
    return prog in ALWAYS_SUCCEED or (prog == "exit" and words[1:2] in ([], ["0"]))


def _fails(words: List[str]) -> bool:
    """``exit N`` with N != 0, or ``false``: what may stand after ``||``."""
    prog = words[0] if words else ""
    return prog == "false" or (prog in ("exit", "return") and len(words) > 1 and words[1] not in ("0", "$?"))


def _set_options(args: List[str]) -> List[str]:
    """The options a ``set`` command sets (``set -e -o pipefail`` -> e, pipefail): words after ``--`` or after the
    first word that is not an option are positional parameters, not options."""
    out: List[str] = []
    j = 0
    while j < len(args) and args[j][:1] in ("-", "+") and args[j] not in ("-", "--"):
        letters = list(args[j][1:])
        if letters[-1:] == ["o"]:
            out += letters[:-1] + args[j + 1 : j + 2]
            j += 2
        else:
            out += letters
            j += 1
    return out


def _status_wraps(words: List[str]) -> bool:
    """``exit N``/``return N`` whose status is not a plain 1..255 or ``$?`` (256 wraps to 0, text is not a number)."""
    if words[:1] not in (["exit"], ["return"]) or len(words) < 2:
        return False
    arg = words[1]
    return arg != "$?" and not (arg.isdigit() and 0 < int(arg) < 256) and arg != "0"


def _starts_another(words: List[str]) -> Optional[str]:
    """The word of a script command that starts another shell or the image's Python (``env sh``, ``timeout 5
    bash``, ``xargs python``, ``{python} -c``), or None: a shell gate's checks are its own script's."""
    for n, word in enumerate(words):
        name = os.path.basename(word.strip("'\""))
        if name in SHELLS or name in ("eval", "exec", "source", ".") and n == 0:
            return word
        if word == PYTHON or re.fullmatch(r"python[0-9.]*", name):
            if gate_argv_problem(words[n:], None) is not None:
                return word
    return None


def script_problem(script: str, errexit: bool = False, pipefail: bool = False) -> Optional[str]:
    """Why this shell script can pass although a command in it failed, or None. ``errexit``/``pipefail``: the
    shell was started with ``-e`` / ``-o pipefail``."""
    segments = _split_script(script)
    words = [seg.split() for _, seg in segments]
    first = _set_options(words[0][1:]) if words and words[0][:1] == ["set"] else []
    errexit = errexit or "e" in first or "errexit" in first  # only a `set` before every other command counts
    pipefail = pipefail or "pipefail" in first
    if any(a.startswith("+") for w in words if w and w[0] == "set" for a in w[1:]):
        return "`set +e` lets the script run on after a failure"
    if not segments or all(_always_succeeds(w) or w[0] == "set" for w in words):
        return "only runs commands that always succeed: this gate cannot fail"
    for n, ((op, seg), w) in enumerate(zip(segments, words)):
        before = segments[n - 1][1] if n else ""
        if w and w[0] == "trap":
            return "`trap` can replace the script's exit status"
        if w and w[0] != PYTHON and (w[0] in GRAMMAR or w[0].startswith(("(", "{")) or w[0].endswith("()")):
            return (
                "`%s`: a shell gate's script is simple commands (compound commands are where `set -e` is "
                "ignored)" % seg[:40]
            )
        if n and w and w[0] == "set":
            return "`%s` after the first command: the shell's options are set once, first" % seg[:40]
        if _status_wraps(w):
            return "`%s` is not an exit status of 1 to 255: it can wrap to 0" % seg[:40]
        other = _starts_another(w)
        if other is not None:
            return "`%s` starts another shell or program whose script this gate cannot judge" % other[:40]
        if op in (";", "\n") and n > 1 and segments[n - 1][0] == "&&":
            return "`%s && %s` is a list `set -e` ignores: its failure runs on into `%s`" % (
                segments[n - 2][1][:40],
                before[:40],
                seg[:40],
            )
        if w and w[0] == "!":
            return "`! %s` turns its failure into success" % " ".join(w[1:])[:40]
        if op == "||" and not _fails(w):
            return "`%s || %s` passes when `%s` fails" % (before[:40], seg[:40], before[:40])
        if op in (";", "\n") and not errexit and words[n - 1][:1] != ["set"]:
            return "`%s; %s` runs on after `%s` fails and loses its exit status (use && or set -e)" % (
                before[:40],
                seg[:40],
                before[:40],
            )
        if op == "|" and not pipefail:
            return "`%s | %s` has the exit status of `%s` only (set -o pipefail)" % (before[:40], seg[:40], seg[:40])
        if op == "&":
            return "`%s &` runs in the background: its failure is never seen" % before[:40]
    return None


def _program(argv: List[str]) -> Tuple[str, List[str]]:
    """The program an argv runs and its arguments, looking through ``env [-i] [VAR=value]...``."""
    i = 0
    while i < len(argv) and os.path.basename(argv[i]) == "env":
        i += 1
        while i < len(argv) and (argv[i].startswith("-") or "=" in argv[i]):
            i += 1
    return (os.path.basename(argv[i]) if i < len(argv) else ""), argv[i + 1 :]


def _shell_script(args: List[str]) -> Tuple[Optional[str], List[str]]:
    """The ``-c`` script of a shell's arguments and the options given before it (``-e``, ``-o pipefail`` read as
    ``e``, ``pipefail``); the script is None when the shell runs a file."""
    options: List[str] = []
    j = 0
    while j < len(args) and args[j][:1] in ("-", "+") and args[j] not in ("-", "--"):
        arg, letters = args[j], list(args[j][1:])
        options += ["+"] if arg[0] == "+" else []
        if letters[-1:] in (["o"], ["O"]) and "c" not in letters:  # -o NAME (-euo pipefail): NAME is an option
            options += letters[:-1] + args[j + 1 : j + 2]
            j += 2
        elif "c" in letters:
            options += [c for c in letters if c != "c"]
            return (args[j + 1] if j + 1 < len(args) else ""), options
        else:
            options += letters
            j += 1
    return None, options


def _python_problem(argv: List[str]) -> Optional[Tuple[int, str]]:
    """Why an argv without a shell is not the image's Python on a script file or a module, or None."""
    usage = (
        "a command gate without `shell` is the image's Python on a script or a module ({python} SCRIPT.py ..., "
        "{python} -m MODULE ...): no other program, option or inline code"
    )
    if argv[0] != PYTHON or len(argv) < 2:
        return 0, usage
    if argv[1] == "-m":
        module = argv[2] if len(argv) > 2 else ""
        if not MODULE_RE.fullmatch(module):
            return 2 if len(argv) > 2 else 1, usage
        if module.split(".")[0] in STDLIB:
            return 2, "-m %s is the interpreter's own program, not a check of the image" % module.split(".")[0]
        return None
    if not SCRIPT_RE.fullmatch(argv[1]) or ".." in argv[1].split("/"):
        return 1, usage
    return None


def gate_argv_problem(argv: List[str], shell_reason: Optional[str]) -> Optional[Tuple[int, str]]:
    """The one rule of what a command gate may run: (index of the argument at fault, why) when this argv cannot be
    a gate, else None. Without a shell reason: the image's Python on a script or a module; with one: a shell whose
    script cannot hide a failure."""
    prog, args = _program(argv)
    if not prog:
        return 0, "runs no program"
    if _always_succeeds([prog] + args):
        return 0, "%r always exits 0: this gate cannot fail" % prog
    if prog not in SHELLS:
        return _python_problem(argv)
    if prog in SHELLS:
        if not shell_reason:
            return 0, (
                "runs a shell (%s): a command gate is an argv run without one; give the program's argv, or say "
                "under 'shell' why it needs a shell" % prog
            )
        if os.path.basename(argv[0]) not in SHELLS:
            return 0, "starts its shell through %s: give the shell's argv itself" % os.path.basename(argv[0])
        script, options = _shell_script(args)
        problem = None
        if script is None:
            return len(argv) - len(args), "runs a script file this gate cannot judge: give the script with -c"
        if script is not None and "+" not in options:
            problem = script_problem(script, errexit="e" in options, pipefail="pipefail" in options)
        elif script is not None:
            problem = "options with + (`+e`, `+o`) let the script run on after a failure"
        if problem:
            assert script is not None  # a problem is found only in a script
            return argv.index(script, len(argv) - len(args)), problem
    return None


def refusals(value: Any) -> List[Tuple[str, str]]:
    """(key, why) for every entry of a ``commands`` list whose argv the rule refuses: what lint lists, all at once
    (loading stops at the first)."""
    out: List[Tuple[str, str]] = []
    for i, entry in enumerate(value if isinstance(value, list) else []):
        argv = entry.get("argv") if isinstance(entry, dict) else None
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            shell = entry.get("shell") if isinstance(entry.get("shell"), str) and entry["shell"].strip() else None
            problem = gate_argv_problem(argv, shell)
            if problem is not None:
                out.append(("commands[%d].argv[%d]" % (i, problem[0]), problem[1]))
    return out


def _is_seconds(value: Any) -> bool:
    """A gate timeout: a finite number of seconds in (0, MAX_TIMEOUT] (not a bool, NaN or infinity: a wait on
    the child takes no larger bound)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and 0 < value <= MAX_TIMEOUT


def _commands(value: Any, where: str) -> List[CommandSpec]:
    if not isinstance(value, list) or not value:
        raise config_error(where, "commands", 'must be a non-empty list of {"name", "argv"} objects')
    out = []
    for i, entry in enumerate(value):
        key = "commands[%d]" % i
        if not isinstance(entry, dict) or set(entry) - set(COMMAND_KEYS):
            raise config_error(where, key, "must be an object with 'name', 'argv' and optionally 'timeout', 'shell'")
        if not isinstance(entry.get("name"), str) or not entry["name"]:
            raise config_error(where, key + ".name", "is required and must be a non-empty string")
        argv = entry.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise config_error(where, key + ".argv", "must be a non-empty list of strings")
        shell = entry.get("shell")
        if shell is not None and (not isinstance(shell, str) or not shell.strip()):
            raise config_error(where, key + ".shell", "must say why this gate needs a shell (a non-empty string)")
        problem = gate_argv_problem(argv, shell)
        if problem is not None:
            raise config_error(where, "%s.argv[%d]" % (key, problem[0]), problem[1])
        timeout = entry.get("timeout", 600.0)
        if not _is_seconds(timeout):
            raise config_error(
                where, key + ".timeout", "must be a positive number of seconds, finite and at most %d" % MAX_TIMEOUT
            )
        out.append(CommandSpec(entry["name"], list(argv), float(timeout), shell))
    return out


class CommandRun:
    """A gate command started in the background (like pip check, it overlaps the in-process checks)."""

    def __init__(self, spec: CommandSpec):
        self.spec, self.started, self.error = spec, time.perf_counter(), None
        self.argv = [a.replace("{python}", sys.executable) for a in spec.argv]
        self.proc: Optional[subprocess.Popen] = None
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                universal_newlines=True,
                errors="replace",
                start_new_session=True,  # its own process group: a timeout ends everything it started
            )
        except OSError as exc:
            self.error = "cannot run %s: %s" % (self.argv[0], exc.strerror)

    def result(self) -> CheckResult:
        """Wait for the command: exit 0 passes, else the last output line is the detail."""
        res = self._judge()
        res.seconds = time.perf_counter() - self.started
        return res

    def _judge(self) -> CheckResult:
        name = self.spec.name
        if self.proc is None:
            return CheckResult("command", name, False, self.error or "did not start")
        try:
            left = self.spec.timeout - (time.perf_counter() - self.started)
            out, _ = self.proc.communicate(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:  # already gone
                pass
            out, _ = self.proc.communicate()
            return CheckResult("command", name, False, "timed out after %gs" % self.spec.timeout, log=out or "")
        lines = [ln for ln in out.splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else "(no output)"
        if self.proc.returncode != 0:
            return CheckResult("command", name, False, short("exit %d: %s" % (self.proc.returncode, last)), log=out)
        return CheckResult("command", name, True, short(last), log=out)


class Command(Gate):
    key = "commands"
    kind = "command"
    order = 70
    passes_when = (
        "the argv (`{python}` = this interpreter), run without a shell, exits 0; failure detail = exit code + last "
        "output line. A shell needs a `shell` reason, and a script that can hide a failure, or an argv that cannot "
        "fail (`true`, `:`, `echo`), is refused"
    )

    def parse(self, value: Any, where: str) -> List[CommandSpec]:
        return _commands(value, where)

    def dump(self, items: List[CommandSpec]) -> Any:
        out = []
        for c in items:
            entry: Dict[str, Any] = {"name": c.name, "argv": list(c.argv), "timeout": c.timeout}
            if c.shell:
                entry["shell"] = c.shell
            out.append(entry)
        return out

    def target(self, item: CommandSpec) -> str:
        return item.name

    def start(self, items: List[CommandSpec], cfg: "GateConfig") -> List[Check]:
        return [CommandRun(spec).result for spec in items]

    def cst_tests(
        self, items: List[CommandSpec], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        """A plain commandTest of the argv: the image's own program, judged by its exit code."""
        tests = []
        for cmd in items:
            argv = [a.replace("{python}", python) for a in cmd.argv]
            tests.append({"name": "command %s" % cmd.name, "command": argv[0], "args": argv[1:], "exitCode": 0})
        return tests
