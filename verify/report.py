"""Console lines, JSON and JUnit XML for a list of CheckResults. JUnit is what GitLab/GitHub/Jenkins render."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, List

from .result import CheckResult

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def line(res: CheckResult) -> str:
    """``PASS  kind        target  detail  (0.12s)``; fields are separated by at least two spaces."""
    detail = " ".join(res.detail.split()) or "-"
    return "%s  %-10s  %s  %s  (%.2fs)" % (res.status, res.kind, res.target, detail, res.seconds)


def summary(results: List[CheckResult]) -> str:
    failed = sum(1 for r in results if not r.passed)
    text = "%d passed, %d failed" % (len(results) - failed, failed)
    allowed = sum(1 for r in results if r.allowed)
    return text + (" (%d allowed)" % allowed if allowed else "")


def to_json(results: List[CheckResult]) -> dict:
    failed = sum(1 for r in results if not r.passed)
    return {
        "checks": [
            {
                "status": r.status,
                "kind": r.kind,
                "target": r.target,
                "detail": r.detail,
                "seconds": round(r.seconds, 4),
                "allowed": r.allowed,
                "log": r.log,
            }
            for r in results
        ],
        "passed": len(results) - failed,
        "failed": failed,
        "total": len(results),
        "seconds": round(sum(r.seconds for r in results), 4),
        "python": sys.executable,
        "python_version": sys.version.split()[0],
    }


def write_json(results: List[CheckResult], path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(to_json(results), fh, indent=2)
        fh.write("\n")


def _clean(text: str) -> str:
    return _XML_BAD.sub("?", text)


def to_junit(results: List[CheckResult], suite: str = "verify") -> "ET.Element":
    """``<testsuites><testsuite><testcase classname=verify.KIND name=TARGET><failure message=...>log``."""
    import xml.etree.ElementTree as ET  # imported when a JUnit report is asked for, not at every start-up

    failed = sum(1 for r in results if not r.passed)
    total_time = "%.3f" % sum(r.seconds for r in results)
    root = ET.Element(
        "testsuites", name=suite, tests=str(len(results)), failures=str(failed), errors="0", time=total_time
    )
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failed),
        errors="0",
        skipped="0",
        time=total_time,
    )
    for r in results:
        case = ET.SubElement(
            ts, "testcase", classname="%s.%s" % (suite, r.kind), name=_clean(r.target), time="%.3f" % r.seconds
        )
        if not r.passed:
            fail = ET.SubElement(case, "failure", message=_clean(r.detail), type=r.kind)
            fail.text = _clean(r.log or r.detail)
        elif r.detail or r.log:
            out = ET.SubElement(case, "system-out")
            out.text = _clean(r.detail + ("\n" + r.log if r.log else ""))
    return root


def write_junit(results: List[CheckResult], path: str) -> None:
    import xml.etree.ElementTree as ET

    ET.ElementTree(to_junit(results)).write(path, encoding="utf-8", xml_declaration=True)
