"""gpu-command runs a command only where a GPU driver is present; without one it says so, fails when a GPU host run
requires one (MILES_GATES_REQUIRE_GPU=1), keeps the command rules, and exports nothing to CST. This machine has no
GPU driver."""

from __future__ import annotations

import json

import pytest

from toolkit.gates.cst_export import to_cst
from verify.config import ConfigError, from_dict
from verify.kinds.gpu_import import gpu_driver

FAILING = {"name": "kernel-vs-reference", "argv": ["{python}", "probes/say.py", "--exit", "3"]}

no_driver = pytest.mark.skipif(gpu_driver() != "", reason="a GPU driver is present")


@no_driver
def test_without_a_driver_it_is_not_run_and_a_required_gpu_fails(bundle, tmp_path, run_verify, lines):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"gpu_commands": [FAILING], "imports": ["json"]}))
    report = tmp_path / "r.json"
    ok = run_verify("--config", cfg, "--json", report, cwd=bundle)
    assert ok.returncode == 0, ok.stdout + ok.stderr  # the failing command never ran
    (check,) = [c for c in json.loads(report.read_text())["checks"] if c["kind"] == "gpu-command"]
    assert check["status"] == "PASS" and check["detail"].startswith("not run"), check
    assert check["target"] == "kernel-vs-reference"
    required = run_verify("--config", cfg, env={"MILES_GATES_REQUIRE_GPU": "1"}, cwd=bundle)
    assert required.returncode == 1, required.stdout + required.stderr
    (line,) = lines(required, "FAIL", "gpu-command")
    assert "MILES_GATES_REQUIRE_GPU=1 requires one" in line


def test_the_command_rules_hold_and_name_the_gpu_key():
    with pytest.raises(ConfigError, match=r"key 'gpu_commands\[0\]\.argv\[0\]' a command gate is the image's Python"):
        from_dict({"gpu_commands": [{"name": "t", "argv": ["true"]}]}, "gates.json")
    with pytest.raises(ConfigError, match=r"key 'gpu_commands\[0\]\.argv\[0\]' a command gate is"):
        from_dict({"gpu_commands": [{"name": "s", "argv": ["bash", "-c", "exit 1"]}]}, "gates.json")
    with pytest.raises(ConfigError, match=r"key 'gpu_commands' must be a non-empty list"):
        from_dict({"gpu_commands": []}, "gates.json")
    cfg = from_dict({"gpu_commands": [dict(FAILING, timeout=30)]}, "gates.json")
    assert cfg.to_dict() == {"gpu_commands": [dict(FAILING, timeout=30.0)]}


def test_cst_exports_nothing_of_it():
    cst = to_cst({"gpu_commands": [FAILING], "imports": ["json"]}, "python3")
    assert [t["name"] for t in cst["commandTests"]] == ["import json"]
