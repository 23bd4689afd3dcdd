"""stub-import: the CUDA driver stub that every import gate's child imports against, in a build without a driver.

A build has no GPU driver, but the CUDA toolkit ships one's stub (``<CUDA_HOME>/lib64/stubs/libcuda.so``): it
exports the driver API, so a module that only binds libcuda's symbols at import (sgl_kernel's ops,
TransformerEngine's core, and everything that imports them: megatron.core, modelopt.torch) loads against it.
Declaring the stub (``{"stub": PATH}``) makes every ``imports`` child (base.py ``fresh_import``) import with a
private temporary folder first on its ``LD_LIBRARY_PATH``, holding one link, ``libcuda.so.1`` -> the stub; the
folder is removed when the child ends, so neither the runner, the image's environment nor a layer ever sees it. No
module list says which imports need it: whatever a module's import chain reaches is served, as on a GPU host.
Where a real driver loads, the children import against it and the stub is not read. This kind's own check says
which of the two the imports ran against; a missing stub fails it (never "not run").
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Optional

from ..result import CheckResult
from .base import ConfigError, Gate, config_error, cuda_driver

if TYPE_CHECKING:
    from ..config import GateConfig

__all__ = ["StubImportGate", "cuda_driver", "import_stub"]


def _stub_path(stub: Any) -> bool:
    if not isinstance(stub, str) or set("\n\0") & set(stub):
        return False
    return os.path.isabs(stub) and os.path.normpath(stub) == stub


def import_stub(cfg: "GateConfig") -> Optional[str]:
    """The stub the import children load ``libcuda.so.1`` from: the declared one, unless a real driver loads here
    (then none is needed) or it is missing (then this kind's check fails, and the children run without it)."""
    stubs = cfg[StubImportGate.key]
    if not stubs or cuda_driver() or not os.path.isfile(stubs[0]):
        return None
    return str(stubs[0])


class StubImportGate(Gate):
    key = "stub_imports"
    kind = "stub-import"
    order = 29  # before the imports it serves: its line says what they ran against
    passes_when = (
        "`stub` (the CUDA toolkit's driver stub) is a file, or a real driver loads; every import gate's child then "
        "has `libcuda.so.1` linked to it first on its own `LD_LIBRARY_PATH` (none where a driver loads)"
    )
    never_does = "put the stub on the image's or the runner's library path"

    def parse(self, value: Any, where: str) -> List[str]:
        if isinstance(value, dict) and "modules" in value:
            raise config_error(
                where,
                self.key + ".modules",
                "is gone: every import runs against the declared stub, so list the modules under 'imports'",
            )
        if not isinstance(value, dict) or set(value) != {"stub"}:
            raise config_error(where, self.key, "must be an object with 'stub' (the driver stub's path)")
        if not _stub_path(value["stub"]):
            raise config_error(where, self.key + ".stub", "must be an absolute, normalised path: %r" % (value["stub"],))
        return [value["stub"]]

    def dump(self, items: List[str]) -> Any:
        return {"stub": items[0]}

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--driver-stub", metavar="PATH", help="import every --import/imports module against this driver stub"
        )

    def from_flags(self, args: Any) -> List[str]:
        return [args.driver_stub] if args.driver_stub else []

    def merge(self, from_config: List[str], from_flags: List[str]) -> List[str]:
        """One stub per run: the flag's replaces the config's."""
        if from_flags and not _stub_path(from_flags[0]):
            raise ConfigError("--driver-stub must be an absolute, normalised path: %r" % from_flags[0])
        return from_flags or from_config

    def check(self, stub: str) -> CheckResult:
        if cuda_driver():
            return CheckResult(self.kind, stub, True, "not used: a CUDA driver loads here, imports run against it")
        if not os.path.isfile(stub):
            return CheckResult(self.kind, stub, False, "driver stub %s is missing: imports run without it" % stub)
        return CheckResult(self.kind, stub, True, "imports load libcuda.so.1 from it (no driver here)")
