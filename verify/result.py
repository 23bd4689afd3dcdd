"""One check's outcome: the unit every report format is built from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional


@dataclass
class CheckResult:
    """What a check found. ``detail`` is one line for the console; ``log`` holds the long form (traceback, output)."""

    kind: str
    target: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0
    log: str = ""
    allowed: bool = False  # passed only because the config allows a known problem (pip check)
    # For an allowed check: {"line": the pip check line, "rule": the allow rule as the config says it, "config":
    # where the config says it (pip_check.allow[N]), "reason": the rule's reason}; None otherwise.
    allowed_by: Optional[Dict[str, Any]] = None
    # A failure a stand-in build expects (verify/stand_in.py): "not built here: STEP (why)" or "differs from base:
    # WHY". It stays failed, and does not fail the run.
    excused: Optional[str] = None

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "EXCUSED" if self.excused else "FAIL"

    @property
    def failed(self) -> bool:
        return not self.passed and not self.excused
