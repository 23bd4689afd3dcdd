"""stub-import: a module that needs libcuda's symbols at import, imported in a build against the driver stub.

A build has no GPU driver, but the CUDA toolkit ships one's stub (``<CUDA_HOME>/lib64/stubs/libcuda.so``): it
exports the driver API, so a module that only binds libcuda's symbols at import (sgl_kernel's ops, say) loads
against it. Each module is imported, after torch, in a child process whose ``LD_LIBRARY_PATH`` starts with a
private temporary folder holding one link, ``libcuda.so.1`` -> the stub; the folder is removed when the child ends,
so neither the runner, the image's environment nor a layer ever sees it. Where a real driver loads, the child
imports against it instead. A missing stub fails the check: it is never "not run".
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, List, Optional

from .. import PACKAGE_DIR
from ..result import CheckResult
from .base import Check, ConfigError, Gate, config_error, short, str_list
from .imports import MODULE_RE, Import

TIMEOUT = 600.0
MARK = "verify-stub-import: "  # the child's last line: this mark, then its result as JSON
SONAME = "libcuda.so.1"
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from verify.kinds.stub_import import child; child(sys.argv[2])"


@dataclass
class StubImport:
    module: str
    stub: str  # the driver stub's path in the image


def cuda_driver() -> bool:
    """Whether a real CUDA driver loads here (then no stub is used)."""
    try:
        ctypes.CDLL(SONAME)
    except OSError:
        return False
    return True


def child(module: str) -> None:
    """The child's side: import ``module`` as the import gate does (after torch) and print the result."""
    res = Import().check(module)
    sys.stdout.flush()
    sys.stdout.write("\n" + MARK + json.dumps({"passed": res.passed, "detail": res.detail, "log": res.log}) + "\n")
    sys.exit(0 if res.passed else 1)


class StubRun:
    """One module's child process, started in the background (it overlaps the in-process checks)."""

    def __init__(self, item: StubImport, driver: bool):
        self.item, self.started, self.proc, self.error = item, time.perf_counter(), None, ""
        self.folder: Optional[str] = None
        self.against = "the driver" if driver else "the driver stub %s" % item.stub
        env = dict(os.environ)
        if not driver:
            if not os.path.isfile(item.stub):
                self.error = "driver stub %s is missing: nothing to import %s against" % (item.stub, item.module)
                return
            self.folder = tempfile.mkdtemp(prefix="verify-stub-")
            os.symlink(item.stub, os.path.join(self.folder, SONAME))
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (self.folder, env.get("LD_LIBRARY_PATH")) if p)
        argv = [sys.executable, "-c", _CHILD, os.path.dirname(PACKAGE_DIR), item.module]
        try:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env
            )
        except OSError as exc:
            self.error = "cannot run %s: %s" % (sys.executable, exc.strerror)
            self._clean()

    def _clean(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def result(self) -> CheckResult:
        try:
            res = self._judge()
        finally:
            self._clean()
        res.seconds = time.perf_counter() - self.started
        return res

    def _judge(self) -> CheckResult:
        module = self.item.module
        if self.proc is None:
            return CheckResult(StubImportGate.kind, module, False, self.error)
        try:
            out, _ = self.proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            return CheckResult(StubImportGate.kind, module, False, "timed out after %gs" % TIMEOUT, log=out or "")
        marked = [ln for ln in out.splitlines() if ln.startswith(MARK)]
        if not marked:  # the child died before it could say why (a crash in a library's initialiser, say)
            lines = [ln for ln in out.splitlines() if ln.strip()]
            last = lines[-1].strip() if lines else "(no output)"
            detail = "exit %d against %s: %s" % (self.proc.returncode, self.against, last)
            return CheckResult(StubImportGate.kind, module, False, short(detail), log=out)
        got = json.loads(marked[-1][len(MARK) :])
        log = "\n".join(ln for ln in out.splitlines() if not ln.startswith(MARK)) + "\n" + got["log"]
        detail = "against %s: %s" % (self.against, got["detail"])
        return CheckResult(StubImportGate.kind, module, bool(got["passed"]), short(detail), log=log.strip())


class StubImportGate(Gate):
    key = "stub_imports"
    kind = "stub-import"
    order = 32
    passes_when = (
        "the import succeeds (after torch) in a child process whose `LD_LIBRARY_PATH` alone holds `libcuda.so.1` "
        "linked to `stub` (the CUDA toolkit's driver stub), or against the real driver where one loads; a missing "
        "stub fails"
    )
    never_does = "put the stub on the image's or the runner's library path"

    def parse(self, value: Any, where: str) -> List[StubImport]:
        if not isinstance(value, dict) or set(value) != {"stub", "modules"}:
            raise config_error(where, self.key, "must be an object with 'stub' (the driver stub's path) and 'modules'")
        stub = value["stub"]
        if (
            not isinstance(stub, str)
            or not os.path.isabs(stub)
            or os.path.normpath(stub) != stub
            or set("\n\0") & set(stub)
        ):
            raise config_error(where, self.key + ".stub", "must be an absolute, normalised path: %r" % (stub,))
        modules = str_list(value["modules"], where, self.key + ".modules", MODULE_RE)
        return [StubImport(m, stub) for m in modules]

    def dump(self, items: List[StubImport]) -> Any:
        return {"stub": items[0].stub, "modules": [i.module for i in items]}

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--stub-import",
            dest="stub_imports",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE against the driver stub (--driver-stub, or the config's stub_imports.stub)",
        )
        parser.add_argument("--driver-stub", metavar="PATH", help="the driver stub that --stub-import uses")

    def from_flags(self, args: Any) -> List[StubImport]:
        return [StubImport(m, args.driver_stub or "") for m in args.stub_imports]

    def merge(self, from_config: List[StubImport], from_flags: List[StubImport]) -> List[StubImport]:
        """Flag modules take --driver-stub, else the config's stub; one run imports against one stub."""
        default = from_config[0].stub if from_config else ""
        flags = [StubImport(i.module, i.stub or default) for i in from_flags]
        if any(not i.stub for i in flags):
            raise ConfigError("--stub-import needs --driver-stub PATH (or a config with stub_imports.stub)")
        stubs = sorted({i.stub for i in from_config + flags})
        if len(stubs) > 1:
            raise ConfigError("stub_imports: one driver stub per run, got %s" % " and ".join(stubs))
        if flags and not (os.path.isabs(stubs[0]) and os.path.normpath(stubs[0]) == stubs[0]):
            raise ConfigError("--driver-stub must be an absolute, normalised path: %r" % stubs[0])
        bad = [i.module for i in flags if not MODULE_RE.match(i.module)]
        if bad:
            raise ConfigError("--stub-import: not a module name: %r" % bad[0])
        return from_config + flags

    def target(self, item: StubImport) -> str:
        return item.module

    def start(self, items: List[StubImport]) -> List[Check]:
        driver = cuda_driver()
        return [StubRun(item, driver).result for item in items]
