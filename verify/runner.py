"""Runs a GateConfig's checks in the registry's order (``verify/kinds``), timing each one."""

from __future__ import annotations

import time
from typing import Callable, List, Optional

from .config import GateConfig
from .kinds import KINDS
from .result import CheckResult
from .stand_in import excuse


def run_checks(cfg: GateConfig, on_result: Optional[Callable[[CheckResult], None]] = None) -> List[CheckResult]:
    """Run every check of ``cfg``; ``on_result`` sees each result as soon as it exists (for streaming output)."""
    # Every kind starts before any check runs: subprocess kinds (pip check, commands) overlap the in-process ones,
    # and each is still reported in its kind's place.
    planned = [check for kind in KINDS if kind.key in cfg for check in kind.start(cfg[kind.key], cfg)]
    results: List[CheckResult] = []
    for check in planned:
        start = time.perf_counter()
        got = check()
        elapsed = time.perf_counter() - start
        batch = got if isinstance(got, list) else [got]
        for res in batch:
            excuse(res, cfg.stand_in)  # a stand-in build's expected failure says so (none on a real build)
            if not res.seconds:  # a check that timed itself (a background subprocess) keeps its own time
                res.seconds = elapsed / len(batch)
            results.append(res)
            if on_result is not None:
                on_result(res)
    return results
