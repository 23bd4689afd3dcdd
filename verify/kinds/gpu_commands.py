"""gpu-command: a command gate that needs a GPU (a kernel called on real tensors and compared with a reference).

The entries are those of ``commands`` (verify/kinds/commands.py), with the same rules. A build has no GPU, so such
a command runs only where a driver is present (``build.py verify`` on a GPU host); without one it passes with "not
run" unless ``MILES_GATES_REQUIRE_GPU=1`` says a GPU must be there, when it fails, as gpu-import does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from ..env_flag import REQUIRE_GPU, gpu_required
from ..result import CheckResult
from .base import Check, ConfigError, RunnerTest, config_error
from .commands import Command, CommandRun, CommandSpec
from .gpu_import import gpu_driver

if TYPE_CHECKING:
    from ..config import GateConfig


class GpuCommand(Command):
    key = "gpu_commands"
    kind = "gpu-command"
    order = 71
    passes_when = (
        "where a GPU driver is present, the command passes as a `commands` entry does (same entry shape and "
        "rules); without one it reports `not run` (a failure under MILES_GATES_REQUIRE_GPU=1)"
    )

    def parse(self, value: Any, where: str) -> List[CommandSpec]:
        try:
            return super().parse(value, where)
        except ConfigError as exc:  # the commands schema names its own key: name ours
            if not exc.key.startswith("commands"):
                raise
            raise config_error(where, "gpu_" + exc.key, exc.problem) from None

    def start(self, items: List[CommandSpec], cfg: "GateConfig") -> List[Check]:
        if not gpu_driver():
            return [lambda spec=spec: self._not_run(spec) for spec in items]  # type: ignore[misc]  # bound default
        runs = [CommandRun(spec) for spec in items]  # started now, in the background, as commands are
        return [lambda run=run: self._as_ours(run.result()) for run in runs]  # type: ignore[misc]  # bound default

    def _not_run(self, spec: CommandSpec) -> CheckResult:
        if gpu_required():
            return CheckResult(self.kind, spec.name, False, "no GPU driver here, and %s=1 requires one" % REQUIRE_GPU)
        return CheckResult(self.kind, spec.name, True, "not run: no GPU driver here (build.py verify on a GPU host)")

    def _as_ours(self, res: CheckResult) -> CheckResult:
        res.kind = self.kind
        return res

    def cst_tests(
        self, items: List[CommandSpec], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        return []  # container-structure-test runs without the GPU: nothing of this kind can run there
