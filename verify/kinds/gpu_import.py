"""gpu-import: a module that loads the GPU driver library when it is imported (libcuda.so.1, ROCm's device stack).

A build has no GPU and no driver, so such a module cannot be imported there: this kind imports it only where a
driver is present, which is `build.py verify` on a GPU host. Without a driver it passes with "not run" unless the
environment says a GPU must be there (``MILES_GATES_REQUIRE_GPU`` true: ``1``, ``true`` or ``yes``, read by
verify/env_flag.py; ``build.py verify`` passes the host's on), when it fails: a driverless run is never mistaken for
a passed one.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any, List

from ..env_flag import REQUIRE_GPU, gpu_required
from ..result import CheckResult
from .base import Check, fresh_import
from .imports import Import

if TYPE_CHECKING:
    from ..config import GateConfig


def gpu_driver() -> str:
    """Which driver this environment has ("cuda", "rocm"), or "" for none."""
    if os.path.exists("/dev/kfd"):
        return "rocm"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ""
    return "cuda"


class GpuImport(Import):
    key = "gpu_imports"
    kind = "gpu-import"
    order = 31
    passes_when = (
        "where a GPU driver is present, the import succeeds as an `imports` gate's does (a fresh interpreter, "
        "not a namespace package); without one it reports `not run` "
        "(a failure under MILES_GATES_REQUIRE_GPU=1)"
    )

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--gpu-import",
            dest="gpu_imports",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE where a GPU driver is present",
        )

    def from_flags(self, args: Any) -> List[str]:
        return list(args.gpu_imports)

    def start(self, items: List[str], cfg: "GateConfig") -> List[Check]:
        """Each module in a fresh interpreter against the real driver (as the imports kind runs its own), or
        "not run" where there is none."""
        if not gpu_driver():
            return [lambda module=module: self._not_run(module) for module in items]  # type: ignore[misc]
        return [fresh_import(self.kind, module, None) for module in items]

    def _not_run(self, module: str) -> CheckResult:
        if gpu_required():
            return CheckResult(self.kind, module, False, "no GPU driver here, and %s=1 requires one" % REQUIRE_GPU)
        return CheckResult(self.kind, module, True, "not run: no GPU driver here (build.py verify on a GPU host)")

    def cst_tests(self, items, python, runner_test, cfg):
        return []  # container-structure-test runs without the GPU: nothing of this kind can run there
