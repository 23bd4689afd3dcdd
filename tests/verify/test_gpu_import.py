"""gpu-import runs an import only where a GPU driver is present; without one it says so, and fails when a GPU
host run requires one (MILES_GATES_REQUIRE_GPU=1). This machine has no GPU driver."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from verify.kinds.gpu_import import gpu_driver


def run(env_extra, *args):
    env = {"PATH": "/usr/bin:/bin", **env_extra}
    return subprocess.run([sys.executable, "-m", "verify", *args], capture_output=True, text=True, env=env, cwd=".")


@pytest.mark.skipif(gpu_driver() != "", reason="a GPU driver is present")
def test_without_a_driver_it_is_not_run_and_a_required_gpu_fails(tmp_path):
    out = tmp_path / "r.json"
    ok = run({}, "--gpu-import", "no_such_gpu_module", "--json", str(out))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (check,) = [c for c in json.loads(out.read_text())["checks"] if c["kind"] == "gpu-import"]
    assert check["status"] == "PASS" and "not run" in check["detail"]
    required = run({"MILES_GATES_REQUIRE_GPU": "1"}, "--gpu-import", "json")
    assert required.returncode == 1 and "requires one" in required.stdout + required.stderr
