"""toolkit/engine/docker_engine.py (with toolkit/gates/report.py) reads the gate step's outcome from the runner's JSON
report in the BuildKit log, never from the runner's text lines: fed a plain-progress stream whose text and report
disagree, it prints the report's."""

import json

from toolkit.engine.docker_engine import ProgressParser
from toolkit.gates.report import check_lines, failed_checks, failure_lines
from verify.report import failures, find_report


def _report(*checks):
    failed = sum(1 for c in checks if c["status"] != "PASS")
    return {"runner": "verify", "format": 1, "checks": list(checks), "passed": len(checks) - failed,
            "failed": failed, "total": len(checks)}  # fmt: skip


def _check(status, kind, target, detail, allowed=False, log=""):
    return {"status": status, "kind": kind, "target": target, "detail": detail, "seconds": 0.5,
            "allowed": allowed, "log": log}  # fmt: skip


def _feed(report, verbose=False):
    out = []
    parser = ProgressParser(out.append, raw=False, verbose=verbose)
    for line in [
        "#9 [stage-0 5/5] RUN --mount=type=bind,source=gates,target=/tmp/gates cd /tmp/gates && python gates",
        "#9 1.000 PASS  import      text-only-module  what the text says  (0.10s)",
        "#9 1.100 FAIL  import      another-text-line  text  (0.10s)",
        "#9 1.200 " + json.dumps(report, separators=(",", ":")),
        "#9 DONE 1.3s",
    ]:
        parser.feed(line + "\n")
    return out, parser


def test_the_gate_step_is_printed_from_its_report():
    report = _report(
        _check("PASS", "import", "sglang_attn_bridge", "0.1.0 /site/sglang_attn_bridge"),
        _check("PASS", "pip-check", "sglang", "allowed (why): sglang 1 requires x", allowed=True),
        _check("PASS", "command", "bridge-attention", "PASS triton attention"),
    )
    out, parser = _feed(report)
    text = "\n".join(out)
    assert "text-only-module" not in text and "another-text-line" not in text
    assert "PASS  import      sglang_attn_bridge  0.1.0 /site/sglang_attn_bridge  (0.50s)" in text
    assert "allowed (why)" not in text  # allowed pip-check lines are counted, not listed
    assert out[-1].strip() == (
        "3 passed, 0 failed (1 allowed, --verbose lists them); report: /usr/share/miles-gates/report.json in the image"
    )
    assert find_report(parser.steps["9"].log) == report


def test_verbose_lists_each_allowed_line_with_its_rule_and_reason():
    by = {
        "line": "sglang 1 requires x, which is not installed.",
        "rule": {"distribution": "sglang", "requirement": "x", "reason": "why"},
        "config": "pip_check.allow[2]",
        "reason": "why",
    }
    allowed = dict(_check("PASS", "pip-check", "sglang", "allowed (why): sglang 1 requires x", allowed=True))
    report = _report(_check("PASS", "import", "torch", "2.13"), dict(allowed, allowed_by=by))
    out, _ = _feed(report, verbose=True)
    assert out[-2:] == [
        "      ALLOWED  pip-check  sglang 1 requires x, which is not installed.  "
        "(rule pip_check.allow[2]: sglang -> x; reason: why)",
        "      2 passed, 0 failed (1 allowed); report: /usr/share/miles-gates/report.json in the image",
    ]


def test_the_host_summary_names_the_kept_report(tmp_path):
    from toolkit.gates.verify_image import report_named

    line = "3 passed, 0 failed (1 allowed); report: /tmp/miles-gates/report.json"
    assert report_named(line, tmp_path / "r.json") == f"3 passed, 0 failed (1 allowed); report: {tmp_path}/r.json"
    assert report_named(line, None).endswith("; report: not kept (--json FILE keeps it)")
    assert report_named("PASS  import  x", None) == "PASS  import  x"


def test_a_failed_gate_names_each_failed_check_in_one_line():
    report = _report(
        _check("PASS", "import", "torch", "2.13"),
        _check("FAIL", "command", "bridge-attention", "exit 1: FAIL triton attention raised RuntimeError: x", log="T"),
        _check("FAIL", "import", "miles", "ModuleNotFoundError: No module named 'miles'"),
    )
    assert [c["target"] for c in failed_checks(report)] == ["bridge-attention", "miles"]
    assert check_lines(report, passed=False)[1].startswith("FAIL  import      miles  ModuleNotFoundError")
    failed = check_lines(report, passed=False)
    assert failure_lines(report) == [failed[0], "    T", failed[1]]  # each failed check, then its own log's end
    line = failures(report)
    assert line.startswith("2 of 3 gate checks failed: command bridge-attention: exit 1: FAIL triton attention")
    assert "; import miles: ModuleNotFoundError: No module named 'miles'" in line
    assert len(failures(_report(*[_check("FAIL", "import", "m%d" % i, "x" * 300) for i in range(9)]))) == 400


def test_a_step_without_a_report_is_not_a_gate_step():
    out, parser = _feed({"runner": "something else", "checks": []})
    assert find_report(parser.steps["9"].log) is None and len(out) == 1


def test_a_failed_stand_in_gate_names_each_real_failure_and_never_an_excused_check():
    """Excused checks between the failures (a stand-in build) are neither listed as failures nor shift the lines."""
    excused = dict(_check("EXCUSED", "import", "apex", "No module named 'apex'"), excused="not built here: source apex")
    report = _report(
        _check("FAIL", "import", "megatron.core", "OSError: planted", log="T1"),
        excused,
        _check("FAIL", "pip-check", "typer", "typer 0.25.1 has requirement click>=8.2.1, but you have click 7.1.2."),
    )
    lines = failure_lines(report)
    assert [ln.split()[2] for ln in lines if not ln.startswith("    ")] == ["megatron.core", "typer"]
    assert "apex" not in " ".join(lines)
    assert failures(report).startswith("2 of 3 gate checks failed: import megatron.core")
