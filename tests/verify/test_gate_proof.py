"""The gate runner proves it ran: its report carries the caller's nonce, the interpreter that ran it (a CPython 3,
or the runner refuses to run) and a proof tying both to the checks; the toolkit refuses a missing report, one
without this run's nonce or proof, one from another interpreter, and one missing a gate the config declares. The
build's nonce is derived from the input hash (a cached gate layer keeps a report with the right one), reaches only
the gate step, and the bridge install step proves the bridge is installed by a real Python."""

from __future__ import annotations

import json

import pytest
from support import passing_report

import build
from toolkit.errors import BuildFailed
from toolkit.gates.report import NONCE_ARG, REPORT_PATH, gate_nonce, report_problem
from verify.report import find_report, interpreter_problem

GATES = {"imports": ["json", "csv"], "platform": "cpu", "compile": ["json"], "pip_check": {}}
NONCE = gate_nonce("0" * 64)


def _run(run_verify, tmp_path, *extra):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps(GATES))
    return run_verify("--config", cfg, "--json", "-", *extra)


def test_the_runner_report_carries_the_nonce_the_interpreter_and_the_proof(run_verify, tmp_path):
    proc = _run(run_verify, tmp_path, "--nonce", NONCE, "--json-line", tmp_path / "kept.json")
    report = find_report(proc.stdout.splitlines())
    assert report is not None and report["nonce"] == NONCE, proc.stdout + proc.stderr
    assert report["interpreter"]["implementation"] == "cpython" and report["interpreter"]["version"][0] == 3
    problem = report_problem(report, NONCE, GATES)
    assert problem is None or "failed checks" in problem  # pip check may find this host's own problems
    kept = find_report((tmp_path / "kept.json").read_text().splitlines())
    assert kept is not None and kept["proof"] == report["proof"]  # the line the image keeps is the streamed one


def test_a_missing_report_or_another_runs_is_refused():
    report = passing_report(GATES, NONCE)
    assert report_problem(report, NONCE, GATES) is None
    assert "no gate report" in report_problem(None, NONCE, GATES)
    assert "nonce" in report_problem(report, gate_nonce("1" * 64), GATES)
    assert "nonce" in report_problem(passing_report(GATES, gate_nonce("1" * 64)), NONCE, GATES)
    unproven = {k: v for k, v in report.items() if k not in ("nonce", "proof")}
    assert "nonce" in report_problem(unproven, NONCE, GATES)


def test_an_edited_report_does_not_prove_itself():
    report = passing_report(GATES, NONCE)
    report["checks"] = [c for c in report["checks"] if c["target"] != "csv"]
    assert "proof does not match" in report_problem(report, NONCE, GATES)
    failed = passing_report(GATES, NONCE)
    failed["checks"][0]["status"] = "FAIL"
    assert "proof does not match" in report_problem(failed, NONCE, GATES)


def test_a_report_missing_a_declared_gate_is_refused():
    report = passing_report({k: v for k, v in GATES.items() if k != "compile"}, NONCE)
    assert "no compile check of json" in report_problem(report, NONCE, GATES)
    report = passing_report(dict(GATES, imports=["json"]), NONCE)
    assert "no import check of csv" in report_problem(report, NONCE, GATES)


@pytest.mark.parametrize(
    "found,problem",
    [
        (None, "names no interpreter"),
        ({"executable": "/bin/true", "implementation": "pypy", "version": [3, 10, 0]}, "not CPython"),
        ({"executable": "/usr/bin/python2", "implementation": "cpython", "version": [2, 7, 18]}, "not Python 3"),
        ({"executable": "", "implementation": "cpython", "version": [3, 11, 2]}, "no interpreter executable"),
        ({"executable": "/usr/bin/python3", "implementation": "cpython", "version": "3.11"}, "no interpreter version"),
    ],
)
def test_only_a_cpython_3_runs_the_gates(found, problem):
    assert problem in interpreter_problem(found)
    report = passing_report(GATES, NONCE)
    report["interpreter"] = found
    assert report_problem(report, NONCE, GATES) is not None


def test_the_runner_refuses_a_nonce_that_is_not_one(run_verify, tmp_path):
    proc = _run(run_verify, tmp_path, "--nonce", "$(id)")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--nonce" in proc.stderr


def test_the_nonce_is_per_input_and_deterministic():
    assert gate_nonce("a" * 64) == gate_nonce("a" * 64) != gate_nonce("b" * 64)
    assert len(NONCE) == 32 and int(NONCE, 16) >= 0


class _Plan:
    name = "smoke"
    gates = GATES


class _Ctx:
    gate_nonce = NONCE


def test_the_build_refuses_a_gate_step_without_its_report(monkeypatch):
    with pytest.raises(BuildFailed, match="no gate report.*no tag moved"):
        build.judge_gates(_Plan, _Ctx, [("done", None)], None, "sha256:x")
    with pytest.raises(BuildFailed, match="reported no gate step"):
        build.judge_gates(_Plan, _Ctx, [], None, "sha256:x")
    with pytest.raises(BuildFailed, match="does not carry this run's nonce"):
        build.judge_gates(_Plan, _Ctx, [("done", passing_report(GATES, gate_nonce("2" * 64)))], None, "sha256:x")
    build.judge_gates(_Plan, _Ctx, [("done", passing_report(GATES, NONCE))], None, "sha256:x")


def test_a_cached_gate_step_is_judged_by_the_report_its_layer_keeps(monkeypatch):
    kept = {}
    monkeypatch.setattr(build.engine, "read_image_file", lambda client, image, path: kept.get(path))
    with pytest.raises(BuildFailed, match="no gate report"):
        build.judge_gates(_Plan, _Ctx, [("cached", None)], "client", "sha256:x")
    kept[REPORT_PATH] = json.dumps(passing_report(GATES, NONCE)).encode()
    build.judge_gates(_Plan, _Ctx, [("cached", None)], "client", "sha256:x")


def test_the_rendered_steps_carry_the_proof():
    from toolkit.plan.build_plan import make_plan
    from toolkit.render.context import plan_hash
    from toolkit.render.dockerfile import bridge_version, render
    from toolkit.spec.catalog import load_catalog

    plan = make_plan(load_catalog().resolve("smoke"), sets=[], revision="render")
    text = render(plan)
    gate_at = text.index(f"ARG {NONCE_ARG}\nRUN --mount=type=bind,source=gates")
    assert text.count(NONCE_ARG) == 3 and text.index(NONCE_ARG) == gate_at + 4  # read by the gate step only
    assert f"--json-line {REPORT_PATH}" in text and f'grep -q "\\"nonce\\":\\"${{{NONCE_ARG}}}\\"" ' in text
    bridge = text[text.index("--no-build-isolation /tmp/sglang-attn-bridge") : gate_at]
    assert f"= 'cpython {bridge_version()}'" in bridge and 'm.version("sglang-attn-bridge")' in bridge
    assert len(plan_hash(plan, text)) == 64
