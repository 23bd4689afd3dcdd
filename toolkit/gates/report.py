"""The gate step's outcome as lines for the build's output, read from the runner's JSON report (verify/report.py
finds it in the step's BuildKit log): the checks a passed gate step ran, and each failed check with the end of its
own log. toolkit/engine/docker_engine.py prints them as the build's steps finish or fail.
"""

from __future__ import annotations

LOG_LINES = 15  # lines of a failed gate check's own log (traceback, command output) shown under it


def failed_checks(report: dict) -> list[dict]:
    return [c for c in report["checks"] if c["status"] not in ("PASS", "EXCUSED")]


def check_lines(report: dict, passed: bool | None = None, allowed: bool | None = None) -> list[str]:
    """`STATUS  kind  target  detail` for the report's checks, filtered by passed / allowed."""
    return [
        check_line(c)
        for c in report["checks"]
        if (passed is None or (c["status"] == "PASS") == passed) and (allowed is None or bool(c["allowed"]) == allowed)
    ]


def check_line(check: dict) -> str:
    return f"{check['status']}  {check['kind']:<10}  {check['target']}  {detail(check)}  ({check['seconds']:.2f}s)"


def detail(check: dict) -> str:
    """A check's detail on one line, after what excused it on a stand-in base (verify/stand_in.py)."""
    text = " ".join(str(check["detail"]).split()) or "-"
    return f"{check['excused']}; {text}" if check.get("excused") else text


def gate_summary(report: dict, where: str | None = None, hint: bool = False) -> str:
    """`62 passed, 0 failed (38 allowed); report: WHERE`; `hint`: the count says `--verbose` lists them."""
    from verify.report import STAND_IN_HEADS

    allowed = sum(1 for c in report["checks"] if c["allowed"])
    counted = f" ({allowed} allowed{', --verbose lists them' if hint else ''})" if allowed else ""
    for head in STAND_IN_HEADS:
        count = sum(1 for c in report["checks"] if str(c.get("excused") or "").startswith(head + ":"))
        counted += f", {count} {head}" if count else ""
    return f"{report['passed']} passed, {report['failed']} failed{counted}" + (f"; report: {where}" if where else "")


def step_lines(report: dict, verbose: bool = False) -> list[str]:
    """A finished gate step: its checks (allowed pip-check lines counted in the summary; listed, with the rule that
    allowed each and its reason, when `verbose`), then the summary naming the report the image keeps."""
    from verify.report import allowed_lines

    listed = allowed_lines(report["checks"]) if verbose else []
    summary = gate_summary(report, f"{REPORT_PATH} in the image", hint=not verbose)
    return check_lines(report, allowed=False) + listed + [summary]


def failure_lines(report: dict) -> list[str]:
    """A failed gate step: every failed check, each followed by the last LOG_LINES lines of its own log, indented."""
    lines = []
    for check in failed_checks(report):
        lines.append(check_line(check))
        lines += [f"    {log_line}" for log_line in str(check["log"]).rstrip().splitlines()[-LOG_LINES:]]
    return lines


# ---- The proof that the gate runner ran: its report, with this run's nonce, from a CPython 3, every gate declared.

REPORT_PATH = "/usr/share/miles-gates/report.json"  # where the gate step keeps its one-line report in the image
NONCE_ARG = "MILES_GATE_NONCE"  # the build arg that hands the gate step its nonce (templates/partials/gates.j2)
# Kinds whose checks do not report one target per declared item: pip check reports a line per problem (or one
# "pip check"), a signature resolved through a call table reports the candidate that took the call.
AT_LEAST = {"pip_check": lambda items: 1, "signatures": len}


def gate_nonce(content_hash: str) -> str:
    """The gate step's nonce for a build of this content (toolkit/render/context.py: content_hash, the input hash
    blind to name and platforms): the same for every build of the same content (a cached gate layer's report
    carries it, and the build arg changes nothing before the gate step) and different for every other content (a
    report kept from another content's gate step never matches)."""
    import hashlib

    return hashlib.sha256(b"miles-gate-nonce\0" + content_hash.encode()).hexdigest()[:32]


def report_problem(report: dict | None, nonce: str, gates: dict) -> str | None:
    """Why ``report`` does not prove that the gate runner ran this gate config with ``nonce`` on a CPython 3, or
    None: it must exist, carry the nonce and the proof of it, name a CPython 3 interpreter, and hold a check of
    every gate the config declares."""
    from verify.config import from_dict
    from verify.kinds import KINDS
    from verify.report import interpreter_problem, proof

    if report is None:
        return "no gate report: the gate runner did not run (is the spec's `python` a Python?)"
    if report.get("nonce") != nonce:
        return "the gate report does not carry this run's nonce (a report from another run, or none at all)"
    checks = report.get("checks")
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        return "the gate report holds no list of checks"
    problem = interpreter_problem(report.get("interpreter"))
    if problem is not None:
        return f"the gate report {problem}"
    if report.get("proof") != proof(nonce, report["interpreter"], checks):
        return "the gate report's proof does not match its nonce, interpreter and checks"
    cfg = from_dict(gates, "gates")
    for kind in KINDS:
        items = cfg[kind.key]
        if not items:
            continue
        reported = [c for c in checks if c.get("kind") == kind.kind]
        if kind.key in AT_LEAST:
            if len(reported) < AT_LEAST[kind.key](items):
                return f"the gate report is missing {kind.kind} checks the config declares ({kind.key})"
            continue
        targets = {c.get("target") for c in reported}
        for item in items:
            if kind.target(item) not in targets:
                return f"the gate report has no {kind.kind} check of {kind.target(item)} ({kind.key} declares it)"
    if any(c.get("status") == "EXCUSED" for c in checks) and "stand_in" not in gates:
        return "the gate report excuses checks, and only a stand-in build's gate config may (its stand_in section)"
    if any(c.get("status") not in ("PASS", "EXCUSED") for c in checks) or report.get("failed"):
        return f"the gate report holds failed checks: {gate_summary(report)}"
    return None
