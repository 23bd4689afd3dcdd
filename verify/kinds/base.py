"""What every gate kind is: the base class a kind subclasses, and the helpers the kinds share.

A kind owns everything about itself in its one module: the config key and its schema (``parse``/``dump``), its
command-line flags, where it runs in the order, how it runs, how it is exported to container-structure-test, and
the row the README's gate table shows. Subclassing ``Gate`` with a ``key`` registers the kind.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from .. import PACKAGE_DIR
from ..result import CheckResult

if TYPE_CHECKING:
    from ..config import GateConfig

Outcome = Union[CheckResult, List[CheckResult]]
Check = Callable[[], Outcome]
RunnerTest = Callable[[str, str, str, Dict[str, Any]], Dict[str, Any]]
REGISTERED: List[type] = []  # every Gate subclass with a key, in definition order; verify.kinds sorts and checks
MAX_DETAIL = 300
_IMPORTLIB_DIR = os.path.dirname(importlib.__file__)


class ConfigError(ValueError):
    """A bad config file or a bad command-line value; the message is one line. ``key`` and ``problem`` are set
    when one key is at fault, so a caller can report it in its own words (the toolkit names the spec file)."""

    key = ""
    problem = ""


def config_error(where: str, key: str, msg: str) -> ConfigError:
    err = ConfigError("%s: key '%s' %s" % (where, key, msg))
    err.key, err.problem = key, msg
    return err


class Gate:
    """One gate kind. Subclasses set the class attributes and override what differs from the defaults.

    ``parse`` turns the config value into a non-empty list of items (one check each, as a rule); every other
    method works on such lists, so flags, config files and the CST export share one representation.
    """

    key = ""  # the config key ("imports")
    kind = ""  # the kind in result lines and reports ("import")
    order = 0  # kinds run (and are reported) in ascending order
    passes_when = ""  # the README table: when a check of this kind passes
    never_does = "—"  # the README table: what it never does (import, execute, write)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.key:
            REGISTERED.append(cls)

    # --- config -------------------------------------------------------------------------------------------------

    def parse(self, value: Any, where: str) -> List[Any]:
        """Validate the config value (never None here); raise config_error(where, key, ...) naming the key."""
        raise NotImplementedError

    def dump(self, items: List[Any]) -> Any:
        """The config value that parses back to ``items`` (the CST export writes one-check configs with it)."""
        raise NotImplementedError

    # --- command line -------------------------------------------------------------------------------------------

    def add_flags(self, parser: Any) -> None:
        """Add this kind's flags to the runner's argparse parser (none by default)."""

    def from_flags(self, args: Any) -> List[Any]:
        """The items the parsed flags ask for."""
        return []

    def merge(self, from_config: List[Any], from_flags: List[Any]) -> List[Any]:
        """Flags add to the config by default."""
        return from_config + from_flags

    # --- running ------------------------------------------------------------------------------------------------

    def start(self, items: List[Any], cfg: "GateConfig") -> List[Check]:
        """Called for every kind before any check runs: a kind whose checks are subprocesses starts them here,
        so they overlap the in-process checks; each returned callable still reports in its place. ``cfg`` is the
        whole config, for a kind that another kind's key changes (the driver stub every import runs against)."""
        return [lambda item=item: self.check(item) for item in items]  # type: ignore[misc]  # item bound as a default

    def check(self, item: Any) -> Outcome:
        raise NotImplementedError

    # --- container-structure-test -------------------------------------------------------------------------------

    def target(self, item: Any) -> str:
        """The target a check of ``item`` reports (the third field of its result line)."""
        return str(item)

    def cst_tests(
        self, items: List[Any], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        """By default each item runs through the runner itself on a one-check config, so CST and ``python -m
        verify`` cannot disagree about what the gate means."""
        return [
            runner_test("%s %s" % (self.kind, self.target(i)), self.kind, self.target(i), {self.key: self.dump([i])})
            for i in items
        ]


# --- helpers the kinds share ----------------------------------------------------------------------------------


def short(text: str, limit: int = MAX_DETAIL) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _innermost(exc: BaseException) -> Optional[Tuple[str, int]]:
    """The file:line a person should open: the bad source for a SyntaxError, else the deepest real frame."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno or 0
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        name = frame.filename
        if name.startswith("<frozen") or name.startswith((PACKAGE_DIR + os.sep, _IMPORTLIB_DIR + os.sep)):
            continue
        return name, frame.lineno or 0
    return None


def describe_exception(exc: BaseException) -> str:
    """``Class: message at file:line`` in one line."""
    msg = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    text = short("%s: %s" % (type(exc).__name__, msg), 240)  # shorten the message, never the location
    where = _innermost(exc)
    if where is not None:
        text += " at %s:%d" % where
    return text


def torch_first(module: str) -> bool:
    """Whether ``module`` is imported after torch: always where torch is installed (and the module is not torch's
    own). A compiled torch extension (apex's ``amp_C``, ``fake_int4_quant_cuda``) finds ``libc10.so`` only through
    the torch already loaded, so a fresh process that imports it first fails although the image is right; miles
    imports torch before any of them, and every runner (this one, the stub-import child, the CST export) does too."""
    return module.split(".")[0] != "torch" and importlib.util.find_spec("torch") is not None


def import_module(module: str) -> Tuple[Optional[types.ModuleType], Optional[CheckResult]]:
    """The module (imported after torch where ``torch_first``), or a failed import result saying why (class,
    message, innermost file:line); a failure of torch itself is named as torch's."""
    step = module
    try:
        if torch_first(module):
            step = "torch"
            importlib.import_module("torch")
            step = module
        return importlib.import_module(module), None
    except (Exception, SystemExit) as exc:  # an import may call sys.exit(); that is a failed import, not ours
        why = describe_exception(exc)
        if step != module:
            why = "torch (imported first, as a torch extension needs it): " + why
        return None, CheckResult("import", module, False, why, log=traceback.format_exc())


def str_list(value: Any, where: str, key: str, pattern: Any = None, what: str = "a module name") -> List[str]:
    """A non-empty list of non-empty strings (each matching ``pattern`` when given)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise config_error(where, key, "must be a list of non-empty strings")
    if not value:
        raise config_error(where, key, "must not be empty (an empty list checks nothing: leave the key out)")
    if pattern is not None:
        for i, v in enumerate(value):
            if not pattern.match(v):
                raise config_error(where, "%s[%d]" % (key, i), "is not %s: %r" % (what, v))
    return list(value)


# --- imports in a fresh interpreter ---------------------------------------------------------------------------

SONAME = "libcuda.so.1"  # what a driver-loading library asks the loader for
CHILD_TIMEOUT = 600.0
CHILD_MARK = "verify-import: "  # the child's last line: this mark, then its result as JSON
MAX_CHILDREN = 8  # each child imports torch and what the module pulls in (GBs for megatron.core): memory bounds it
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from verify.kinds.imports import child; child(sys.argv[2])"
_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def cuda_driver() -> bool:
    """Whether a real CUDA driver loads here (then no stub is used)."""
    try:
        ctypes.CDLL(SONAME)
    except OSError:
        return False
    return True


def child_slots() -> int:
    """How many import children run at once: one per CPU this process may use, at most ``MAX_CHILDREN``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_CHILDREN))


def _children() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=child_slots(), thread_name_prefix="verify-import")
        return _pool


def fresh_import(kind: str, module: str, stub: Optional[str]) -> Check:
    """Queue ``module``'s import in a fresh interpreter (this one's executable, the image's python) and return
    the callable that waits for its result. The children of every import kind share one pool of
    ``child_slots()``; they run in the order queued, while the runner goes on with its in-process checks. With
    ``stub``, the child's ``LD_LIBRARY_PATH`` starts with a private folder holding only ``libcuda.so.1`` -> stub,
    removed when the child ends: nothing else (the runner, the image's environment, a layer) sees it."""
    return _children().submit(_run_child, kind, module, stub).result


def _run_child(kind: str, module: str, stub: Optional[str]) -> CheckResult:
    started = time.perf_counter()
    folder = None
    env = dict(os.environ)
    try:
        if stub is not None:
            folder = tempfile.mkdtemp(prefix="verify-stub-")
            os.symlink(stub, os.path.join(folder, SONAME))
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (folder, env.get("LD_LIBRARY_PATH")) if p)
        res = _child_result(kind, module, env)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    res.seconds = time.perf_counter() - started
    return res


def _child_result(kind: str, module: str, env: Dict[str, str]) -> CheckResult:
    argv = [sys.executable, "-c", _CHILD, os.path.dirname(PACKAGE_DIR), module]
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env
        )
    except OSError as exc:
        return CheckResult(kind, module, False, "cannot run %s: %s" % (sys.executable, exc.strerror))
    try:
        out, _ = proc.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return CheckResult(kind, module, False, "timed out after %gs" % CHILD_TIMEOUT, log=out or "")
    marked = [ln for ln in out.splitlines() if ln.startswith(CHILD_MARK)]
    if not marked:  # the child died before it could say why (a crash in a library's initialiser, say)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else "(no output)"
        return CheckResult(kind, module, False, short("exit %d: %s" % (proc.returncode, last)), log=out)
    got = json.loads(marked[-1][len(CHILD_MARK) :])
    log = "\n".join(ln for ln in out.splitlines() if not ln.startswith(CHILD_MARK)) + "\n" + got["log"]
    return CheckResult(kind, module, bool(got["passed"]), got["detail"], log=log.strip())


def report_to_parent(res: CheckResult) -> None:
    """The child's side: print its result as the marked last line and exit with its status, at once (a thread
    or an exit handler the imported module left behind must not hold the gate)."""
    sys.stderr.flush()
    sys.stdout.flush()
    sys.stdout.write("\n" + CHILD_MARK + json.dumps({"passed": res.passed, "detail": res.detail, "log": res.log}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0 if res.passed else 1)
