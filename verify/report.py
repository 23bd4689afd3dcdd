"""Console lines, JSON and JUnit XML for a list of CheckResults. JUnit is what GitLab/GitHub/Jenkins render.

The JSON report is also what a program reads back from a build log (``--json -``: one line on stdout); the
toolkit finds it there with ``find_report`` and names the failed checks with ``failures``.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional

from .result import CheckResult

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

STAND_IN_HEADS = ("not built here", "differs from base")  # verify/stand_in.py SECTIONS' words (no import: a cycle)
RUNNER = "verify"  # the report's "runner" field: how a reader tells it from other JSON in a log
FORMAT = 1
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def line(res: CheckResult) -> str:
    """``PASS  kind        target  detail  (0.12s)``; fields are separated by at least two spaces."""
    detail = " ".join(res.detail.split()) or "-"
    if res.excused:
        detail = "%s; %s" % (res.excused, detail)
    return "%s  %-10s  %s  %s  (%.2fs)" % (res.status, res.kind, res.target, detail, res.seconds)


def summary(results: List[CheckResult], report_path: Optional[str] = None) -> str:
    """``62 passed, 0 failed (38 allowed); report: PATH``: the report part only when a report file was written."""
    failed = sum(1 for r in results if r.failed)
    passed = sum(1 for r in results if r.passed)
    text = "%d passed, %d failed" % (passed, failed)
    allowed = sum(1 for r in results if r.allowed)
    text += " (%d allowed)" % allowed if allowed else ""
    for head in STAND_IN_HEADS:  # a stand-in build's excused checks, counted by what excused them
        count = sum(1 for r in results if (r.excused or "").startswith(head + ":"))
        text += ", %d %s" % (count, head) if count else ""
    return text + ("; report: %s" % report_path if report_path else "")


def allowed_line(check: Dict[str, Any]) -> str:
    """An allowed pip-check line of a report's check, with the rule that allowed it and the rule's reason:
    ``ALLOWED  pip-check  LINE  (rule pip_check.allow[0]: sglang -> torch; reason: REASON)``."""
    by = check.get("allowed_by") or {}
    rule = by.get("rule") or {}
    reqs = rule.get("requirements") or [rule.get("requirement", "?")]
    where = by.get("config") or "pip_check.allow"
    return "ALLOWED  %s  %s  (rule %s: %s -> %s; reason: %s)" % (
        check.get("kind"),
        " ".join(str(by.get("line", check.get("log", ""))).split()),
        where,
        rule.get("distribution", "?"),
        ", ".join(map(str, reqs)),
        " ".join(str(by.get("reason", "?")).split()),
    )


def allowed_lines(checks: List[Dict[str, Any]]) -> List[str]:
    """``allowed_line`` of every allowed check of a report, in the report's order (``--verbose``)."""
    return [allowed_line(c) for c in checks if c.get("allowed")]


NONCE_RE = re.compile(r"[0-9a-f]{32,64}")


def interpreter() -> Dict[str, Any]:
    """What ran the gates, as only a running Python knows it: its executable, implementation and version."""
    return {
        "executable": sys.executable,
        "implementation": sys.implementation.name,
        "version": list(sys.version_info[:3]),
    }


def interpreter_problem(found: Any) -> Optional[str]:
    """Why ``found`` (a report's ``interpreter``) is not a CPython 3 interpreter at an absolute path, or None."""
    if not isinstance(found, dict):
        return "names no interpreter"
    executable, name, version = found.get("executable"), found.get("implementation"), found.get("version")
    if not isinstance(executable, str) or not executable.startswith("/"):
        return "names no interpreter executable (sys.executable %r)" % (executable,)
    if name != "cpython":
        return "was run by %r, not CPython" % (name,)
    if not (isinstance(version, list) and len(version) == 3 and all(type(v) is int for v in version)):
        return "names no interpreter version"
    if version[0] != 3:
        return "was run by Python %s, not Python 3" % ".".join(map(str, version))
    return None


def proof(nonce: str, found: Any, checks: List[Dict[str, Any]]) -> str:
    """The digest that ties a report to the nonce it was given: the nonce, the interpreter, and every check's kind,
    target and status, hashed together (a report copied from another run, or edited, does not match)."""
    h = hashlib.sha256()
    h.update(b"verify-proof\0" + nonce.encode() + b"\0")
    h.update(json.dumps(found, sort_keys=True).encode() + b"\0")
    for c in checks:
        excused = [c["excused"]] if c.get("excused") else []  # what excused a stand-in's check is proven too
        h.update(json.dumps([c.get("kind"), c.get("target"), c.get("status"), *excused]).encode() + b"\0")
    return h.hexdigest()


def check_dict(r: CheckResult) -> Dict[str, Any]:
    """One check as the JSON report holds it; an allowed check names its line, rule and reason (``allowed_by``)."""
    found = {
        "status": r.status,
        "kind": r.kind,
        "target": r.target,
        "detail": r.detail,
        "seconds": round(r.seconds, 4),
        "allowed": r.allowed,
        "allowed_by": r.allowed_by,
        "log": r.log,
    }
    if r.excused:  # only a stand-in build's report has them
        found["excused"] = r.excused
    return found


def to_json(results: List[CheckResult], nonce: Optional[str] = None) -> dict:
    data = {
        "runner": RUNNER,
        "format": FORMAT,
        "checks": [check_dict(r) for r in results],
        "passed": sum(1 for r in results if r.passed),
        "failed": sum(1 for r in results if r.failed),
        "total": len(results),
        "seconds": round(sum(r.seconds for r in results), 4),
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "interpreter": interpreter(),
    }
    if nonce is not None:  # the run's nonce (the toolkit's), and the proof that ties this report to it
        data["nonce"] = nonce
        data["proof"] = proof(nonce, data["interpreter"], data["checks"])  # type: ignore[arg-type]
    return data


def write_json(results: List[CheckResult], path: str, nonce: Optional[str] = None) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(to_json(results, nonce), fh, indent=2)
        fh.write("\n")


STREAM_LIMIT = 64 * 1024  # BuildKit clips a step's output beyond 200 KiB/s: the one line stays well under that
STREAM_LOG_TAIL = 2000  # characters of each check's log kept in the one-line report (the file keeps all of it)


def stream_line(results: List[CheckResult], limit: int = STREAM_LIMIT, nonce: Optional[str] = None) -> str:
    """The JSON report as one line (``--json -``), at most ``limit`` bytes: each check's log is cut to its tail,
    then dropped from passed checks, then from all, as needed; the checks themselves are always all there."""
    data = to_json(results, nonce)
    for check in data["checks"]:
        check["log"] = check["log"][-STREAM_LOG_TAIL:]
    for keep in (lambda c: True, lambda c: c["status"] != "PASS", lambda c: False):
        for check in data["checks"]:
            if not keep(check):
                check["log"] = ""
        text = json.dumps(data, separators=(",", ":")) + "\n"
        if len(text.encode("utf-8")) <= limit:
            break
    return text


KEPT_CHECK_KEYS = ("status", "kind", "target", "allowed", "excused")


def kept_line(results: List[CheckResult], nonce: Optional[str] = None) -> str:
    """The one-line report an image keeps (``--json-line``): each check's outcome and the proof, without times, logs
    or details (a command's last line may hold a measured number), so two builds of one input write the same bytes."""
    data = to_json(results, nonce)
    del data["seconds"]
    data["checks"] = [{k: c[k] for k in KEPT_CHECK_KEYS if k in c} for c in data["checks"]]
    return json.dumps(data, separators=(",", ":")) + "\n"


def find_report(lines: Iterable[str]) -> Optional[Dict[str, Any]]:
    """The last runner report among log lines, or None."""
    found = None
    for text in lines:
        text = text.strip()
        if not text.startswith("{"):
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("runner") == RUNNER and isinstance(data.get("checks"), list):
            found = data
    return found


def failures(data: Dict[str, Any], limit: int = 400) -> str:
    """One line naming every failed check of a report and why, shortened to ``limit`` characters."""
    failed = [c for c in data.get("checks", []) if c.get("status") not in ("PASS", "EXCUSED")]
    parts = ["%s %s: %s" % (c.get("kind"), c.get("target"), " ".join(str(c.get("detail", "")).split())) for c in failed]
    text = "%d of %d gate checks failed: %s" % (
        len(failed),
        data.get("total", len(data.get("checks", []))),
        "; ".join(parts),
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clean(text: str) -> str:
    return _XML_BAD.sub("?", text)


def to_junit(results: List[CheckResult], suite: str = "verify") -> "ET.Element":
    """``<testsuites><testsuite><testcase classname=verify.KIND name=TARGET><failure message=...>log``."""
    import xml.etree.ElementTree as ET  # imported when a JUnit report is asked for, not at every start-up

    failed = sum(1 for r in results if r.failed)
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
        skipped=str(sum(1 for r in results if r.excused)),
        time=total_time,
    )
    for r in results:
        case = ET.SubElement(
            ts, "testcase", classname="%s.%s" % (suite, r.kind), name=_clean(r.target), time="%.3f" % r.seconds
        )
        if r.excused:  # expected of a stand-in base: a skipped test case, with what excused it
            ET.SubElement(case, "skipped", message=_clean(r.excused + "; " + r.detail))
        elif not r.passed:
            fail = ET.SubElement(case, "failure", message=_clean(r.detail), type=r.kind)
            fail.text = _clean(r.log or r.detail)
        elif r.detail or r.log:
            out = ET.SubElement(case, "system-out")
            out.text = _clean(r.detail + ("\n" + r.log if r.log else ""))
        if r.allowed and r.allowed_by:  # the allowed line, the rule and its reason, as properties a reader finds
            props = ET.SubElement(case, "properties")
            rule = json.dumps(r.allowed_by.get("rule"), sort_keys=True)
            for name, value in (
                ("allowed.line", r.allowed_by.get("line")),
                ("allowed.rule", rule),
                ("allowed.config", r.allowed_by.get("config")),
                ("allowed.reason", r.allowed_by.get("reason")),
            ):
                ET.SubElement(props, "property", name=name, value=_clean(str(value or "")))
    return root


def write_junit(results: List[CheckResult], path: str) -> None:
    import xml.etree.ElementTree as ET

    ET.ElementTree(to_junit(results)).write(path, encoding="utf-8", xml_declaration=True)
