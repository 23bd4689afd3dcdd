"""command: the image's Python on a probe this repository ships, or on a module of an installed distribution.

What a command gate may run is one rule, ``gate_argv_problem``: ``{python}`` (the image's interpreter) first, then
either ``probes/NAME.py`` (a file of ``verify/probes/``, which travels in the gate bundle beside the runner) or
``-m MODULE`` (a module outside the standard library: a distribution the image installs, ``pytest``, the bridge's
doctor), then the arguments that probe or module reads. Nothing else: no shell, no other program (``env``,
``nice``, ``timeout``, ``busybox``), no interpreter option (``-c``, ``-I``), no script elsewhere in the image, no
``-m`` on the interpreter's own programs (``runpy``, ``py_compile``, ``timeit``). A probe is found in the runner's
own bundle whatever the working folder, and must be a regular file there; a ``-m`` module must be located outside
the standard library when the gate runs. The runner enforces each gate's timeout itself, on the gate's whole
process group.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .. import PACKAGE_DIR
from ..result import CheckResult
from .base import Check, Gate, RunnerTest, config_error, short

if TYPE_CHECKING:
    from ..config import GateConfig

COMMAND_KEYS = ("name", "argv", "timeout")
MAX_TIMEOUT = 86400  # seconds (a day): the longest a gate command may run, as the toolkit's other timeouts
PYTHON = "{python}"  # the image's interpreter, as a gate's argv names it
PROBES = "probes"  # the bundle's folder of probe files (verify/probes/ in the repository)
PROBE_RE = re.compile(r"probes/[A-Za-z0-9_][A-Za-z0-9_-]*\.py")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# The interpreter's own modules (`-m runpy`, `-m trace`, `-m timeit`, `-m code`): programs that run other code or
# always succeed, never a check of the image. Python 3.10 and later name them; on an older runner the toolkit has
# judged the spec's argv on the host already, and the runner still refuses a module it finds in the standard
# library's folder (``module_problem``).
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
USAGE = (
    "a command gate is the image's Python on a probe of verify/probes/ or on a module of an installed "
    "distribution ({python} probes/NAME.py ..., {python} -m MODULE ...): no other program, option or script"
)


@dataclass
class CommandSpec:
    name: str
    argv: List[str]
    timeout: float = 600.0


def gate_argv_problem(argv: List[str]) -> Optional[Tuple[int, str]]:
    """The one rule of what a command gate may run: (index of the argument at fault, why) when this argv cannot be
    a gate, else None. ``{python}`` first, then ``probes/NAME.py`` or ``-m MODULE`` (not the standard library's),
    then that probe's or module's own arguments."""
    if not argv or argv[0] != PYTHON:
        return 0, USAGE
    if len(argv) < 2:
        return 0, USAGE
    if argv[1] == "-m":
        module = argv[2] if len(argv) > 2 else ""
        if not MODULE_RE.fullmatch(module):
            return (2 if len(argv) > 2 else 1), USAGE
        if module.split(".")[0] in STDLIB:
            return 2, "-m %s is the interpreter's own program, not a check of the image" % module.split(".")[0]
        return None
    if not PROBE_RE.fullmatch(argv[1]):
        return 1, USAGE
    return None


def probe_of(argv: List[str]) -> Optional[str]:
    """The probe file an accepted argv runs (``bridge_attention.py``), or None for ``-m``."""
    return argv[1][len(PROBES) + 1 :] if len(argv) > 1 and PROBE_RE.fullmatch(argv[1]) else None


def bundle_probe(name: str) -> str:
    """Where a probe lies in this runner's bundle: ``probes/`` beside ``verify/``, whatever the working folder."""
    return os.path.join(os.path.dirname(PACKAGE_DIR), PROBES, name)


def _stdlib_dirs() -> List[str]:
    paths = sysconfig.get_paths()
    return [os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)]


def module_problem(module: str) -> Optional[str]:
    """Why ``-m module`` is not a module of an installed distribution here, or None: it must be found, and not in
    the standard library (built in, frozen, or under the stdlib folder but not in its site-packages)."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        return "-m %s: %s" % (module, short(str(exc), 200))
    if spec is None:
        return "-m %s: no module %s is installed" % (module, top)
    where = spec.origin or next(iter(spec.submodule_search_locations or []), None)
    if top in STDLIB or where in (None, "built-in", "frozen"):
        return "-m %s is the interpreter's own module, not a check of the image" % module
    real = os.path.realpath(where)
    for root in _stdlib_dirs():
        inside = real.startswith(root + os.sep)
        if inside and not real[len(root) :].lstrip(os.sep).startswith(("site-packages", "dist-packages")):
            return "-m %s is the standard library's (%s), not a check of the image" % (module, where)
    return None


SHELL_GONE = "is not a key of a command gate: gates run no shell (a check that needs one is a probe in verify/probes/)"


def refusals(value: Any, key: str = "commands") -> List[Tuple[str, str]]:
    """(key, why) for every entry of a ``commands`` (or ``gpu_commands``: ``key``) list the rule refuses: what lint
    lists, all at once (loading stops at the first)."""
    out: List[Tuple[str, str]] = []
    for i, entry in enumerate(value if isinstance(value, list) else []):
        argv = entry.get("argv") if isinstance(entry, dict) else None
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            problem = gate_argv_problem(argv)
            if problem is not None:
                out.append(("%s[%d].argv[%d]" % (key, i, problem[0]), problem[1]))
        if isinstance(entry, dict) and "shell" in entry:
            out.append(("%s[%d].shell" % (key, i), SHELL_GONE))
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
        if isinstance(entry, dict) and "shell" in entry:
            raise config_error(where, key + ".shell", SHELL_GONE)
        if not isinstance(entry, dict) or set(entry) - set(COMMAND_KEYS):
            raise config_error(where, key, "must be an object with 'name', 'argv' and optionally 'timeout'")
        if not isinstance(entry.get("name"), str) or not entry["name"]:
            raise config_error(where, key + ".name", "is required and must be a non-empty string")
        argv = entry.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise config_error(where, key + ".argv", "must be a non-empty list of strings")
        problem = gate_argv_problem(argv)
        if problem is not None:
            raise config_error(where, "%s.argv[%d]" % (key, problem[0]), problem[1])
        timeout = entry.get("timeout", 600.0)
        if not _is_seconds(timeout):
            raise config_error(
                where, key + ".timeout", "must be a positive number of seconds, finite and at most %d" % MAX_TIMEOUT
            )
        out.append(CommandSpec(entry["name"], list(argv), float(timeout)))
    return out


class CommandRun:
    """A gate command started in the background (like pip check, it overlaps the in-process checks)."""

    def __init__(self, spec: CommandSpec):
        self.spec, self.started = spec, time.perf_counter()
        self.proc: Optional[subprocess.Popen] = None
        self.error = self._refused(spec.argv)
        self.argv = [sys.executable] + spec.argv[1:]
        probe = probe_of(spec.argv)
        if probe is not None:
            self.argv[1] = bundle_probe(probe)
        if self.error is not None:
            return
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

    @staticmethod
    def _refused(argv: List[str]) -> Optional[str]:
        """Why this argv does not run here (the rule once more, then the probe or module as this image has it)."""
        problem = gate_argv_problem(argv)
        if problem is not None:
            return problem[1]
        probe = probe_of(argv)
        if probe is None:
            return module_problem(argv[2])
        try:
            st = os.lstat(bundle_probe(probe))
        except OSError as exc:
            return "probe %s is not in the gate bundle: %s" % (probe, exc.strerror)
        if not stat.S_ISREG(st.st_mode):
            return "probe %s in the gate bundle is not a regular file" % probe
        return None

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
        "`{python}` (this interpreter) on a probe of the bundle (`probes/NAME.py`, a regular file) or `-m MODULE` "
        "(found outside the standard library), run without a shell, exits 0; failure detail = exit code + last "
        "output line. Any other argv (a shell, another program, `-c`, a script elsewhere) is refused"
    )

    def parse(self, value: Any, where: str) -> List[CommandSpec]:
        return _commands(value, where)

    def dump(self, items: List[CommandSpec]) -> Any:
        out = []
        for c in items:
            entry: Dict[str, Any] = {"name": c.name, "argv": list(c.argv), "timeout": c.timeout}
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
