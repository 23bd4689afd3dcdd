"""The gate step's outcome as lines for the build's output, read from the runner's JSON report (verify/report.py
finds it in the step's BuildKit log): the checks a passed gate step ran, and each failed check with the end of its
own log. toolkit/engine/docker_engine.py prints them as the build's steps finish or fail.
"""

from __future__ import annotations

LOG_LINES = 15  # lines of a failed gate check's own log (traceback, command output) shown under it


def failed_checks(report: dict) -> list[dict]:
    return [c for c in report["checks"] if c["status"] != "PASS"]


def check_lines(report: dict, passed: bool | None = None, allowed: bool | None = None) -> list[str]:
    """`STATUS  kind  target  detail` for the report's checks, filtered by passed / allowed."""
    return [
        f"{c['status']}  {c['kind']:<10}  {c['target']}  {' '.join(str(c['detail']).split()) or '-'}  "
        f"({c['seconds']:.2f}s)"
        for c in report["checks"]
        if (passed is None or (c["status"] == "PASS") == passed) and (allowed is None or bool(c["allowed"]) == allowed)
    ]


def gate_summary(report: dict) -> str:
    allowed = sum(1 for c in report["checks"] if c["allowed"])
    return f"{report['passed']} passed, {report['failed']} failed" + (f" ({allowed} allowed)" if allowed else "")


def step_lines(report: dict) -> list[str]:
    """A finished gate step: its checks (allowed pip-check lines counted only, in the summary), then the summary."""
    return check_lines(report, allowed=False) + [gate_summary(report)]


def failure_lines(report: dict) -> list[str]:
    """A failed gate step: every failed check, each followed by the last LOG_LINES lines of its own log, indented."""
    lines = []
    for check, line in zip(failed_checks(report), check_lines(report, passed=False)):
        lines.append(line)
        lines += [f"    {log_line}" for log_line in str(check["log"]).rstrip().splitlines()[-LOG_LINES:]]
    return lines
