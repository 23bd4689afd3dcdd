"""toolkit.gates.cst_export without Docker: the shape of the export, and its embedded runner executed for real
on the host."""

import json
import subprocess
import sys

import pytest

from toolkit.gates.cst_export import to_cst, write_cst
from verify.config import ConfigError

GATES = {
    "imports": ["json", "no_such_module_xyz"],
    "compile": ["json"],
    "signatures": [{"target": "json:dumps", "keywords": ["obj", "indent"], "import": False}],
    "platform": "cpu",
    "pip_check": {"allow": [{"distribution": "no-such-dist", "requirement": "other", "reason": "shape only"}]},
    "provenance": {"json": "/"},
    "commands": [{"name": "hello", "argv": ["{python}", "-m", "pytest", "--version"]}],
}


def _run(test):
    return subprocess.run(
        [test["command"], *test["args"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        cwd="/",
    )


def test_shape_and_order():
    cst = to_cst(GATES, sys.executable)
    assert cst["schemaVersion"] == "2.0.0"
    names = [t["name"] for t in cst["commandTests"]]
    assert names == [
        "provenance json",
        "compile json",
        "import json",
        "import no_such_module_xyz",
        "signature json:dumps",
        "platform cpu",
        "pip check",
        "command hello",
    ]
    assert all(t["command"] == sys.executable for t in cst["commandTests"])
    assert json.loads(json.dumps(cst)) == cst
    one_check = json.loads(cst["commandTests"][4]["args"][2])
    assert one_check == {"signatures": [{"target": "json:dumps", "keywords": ["obj", "indent"], "import": False}]}


def test_embedded_runner_really_runs_each_gate():
    """Run every exported commandTest here (cwd /, no verify/ on the path) and apply CST's own pass rule."""
    import re

    results = {}
    for test in to_cst(GATES, sys.executable)["commandTests"]:
        proc = _run(test)
        ok = proc.returncode == test.get("exitCode", 0)
        ok = ok and all(re.search(p, proc.stdout) for p in test.get("expectedOutput", []))
        ok = ok and not any(re.search(p, proc.stdout) for p in test.get("excludedOutput", []))
        results[test["name"]] = (ok, proc.stdout)
    failed = sorted(name for name, (ok, _) in results.items() if not ok)
    assert failed == ["import no_such_module_xyz"], {k: v[1][-300:] for k, v in results.items()}
    assert "PASS  compile" in results["compile json"][1]


def test_runner_dir_mode_does_not_embed(tmp_path):
    from toolkit.render.gate_bundle import RUNNER_DIR

    runner_dir = str(RUNNER_DIR.parent)
    cst = to_cst({"compile": ["json"]}, sys.executable, runner_dir=runner_dir)
    (test,) = cst["commandTests"]
    assert len(test["args"][1]) < 400 and runner_dir in test["args"][1]
    assert _run(test).returncode == 0


def test_invalid_config_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="'platform'"):
        to_cst({"platform": "tpu"}, sys.executable)
    with pytest.raises(ConfigError, match="'imports'"):
        write_cst({"imports": 3}, "python", str(tmp_path / "bad.json"))
    assert not (tmp_path / "bad.json").exists()
    write_cst({"imports": ["json"]}, "python", str(tmp_path / "o.json"))
    assert json.loads((tmp_path / "o.json").read_text())["commandTests"][0]["name"] == "import json"
