"""Runs a GateConfig's checks in the documented order (provenance, compile, import, signature, platform, pip check,
commands), timing each one."""

from __future__ import annotations

import time
from typing import Callable, Iterator, List, Optional

from . import checks
from .config import GateConfig
from .result import CheckResult


def _planned(cfg: GateConfig) -> Iterator[Callable[[], "CheckResult | List[CheckResult]"]]:
    # pip check and the commands are subprocesses: start them now so they overlap the in-process checks;
    # each is still reported in its documented place.
    pip = checks.PipRun() if cfg.pip_check is not None else None
    commands = [checks.CommandRun(cmd) for cmd in cfg.commands]
    for pkg, loc in cfg.provenance.items():
        yield lambda pkg=pkg, loc=loc: checks.check_provenance(pkg, loc)
    for target in cfg.compile:
        yield lambda target=target: checks.check_compile(target)
    for module in cfg.imports:
        yield lambda module=module: checks.check_import(module)
    for spec in cfg.signatures:
        yield lambda spec=spec: checks.check_signature(spec)
    if cfg.platform:
        yield lambda: checks.check_platform(cfg.platform)
    if pip is not None:
        yield lambda: pip.results(cfg.pip_check or [])
    for run in commands:
        yield run.result


def run_checks(cfg: GateConfig, on_result: Optional[Callable[[CheckResult], None]] = None) -> List[CheckResult]:
    """Run every check of ``cfg``; ``on_result`` sees each result as soon as it exists (for streaming output)."""
    results: List[CheckResult] = []
    for check in _planned(cfg):
        start = time.perf_counter()
        got = check()
        elapsed = time.perf_counter() - start
        batch = got if isinstance(got, list) else [got]
        for res in batch:
            if not res.seconds:  # a check that timed itself (the background pip check) keeps its own time
                res.seconds = elapsed / len(batch)
            results.append(res)
            if on_result is not None:
                on_result(res)
    return results
