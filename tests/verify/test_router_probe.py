"""The router gate against the real artefact it must reject: PyPI's sglang-router 0.3.2, the version miles' fork
also calls itself, installed (no deps) beside the probe. Its CLI refuses the key-routed `consistent_hashing`
policy miles selects, so an image that kept it fails the gate. (The fork's own build needs crates.io and a Rust
toolchain, which this machine does not reach; its Python layer was seen to pass the same probe by hand.)"""

from __future__ import annotations

import subprocess
import sys
import zipfile

from support import ROOT, pypi_wheel

PROBE = ROOT / "verify" / "probes" / "router_fork.py"


def test_pypis_router_of_the_same_version_fails_the_fork_gate(tmp_path):
    with zipfile.ZipFile(pypi_wheel("sglang-router", "0.3.2")) as z:
        z.extractall(tmp_path / "site")
    run = subprocess.run(
        [sys.executable, str(PROBE), "/bin/true"],
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "does not take --policy consistent_hashing" in run.stderr
    assert "--policy manual" not in run.stderr  # PyPI's router has `manual`: only the fork's policy is missing


def test_a_gateway_that_does_not_run_fails_the_gate(tmp_path):
    with zipfile.ZipFile(pypi_wheel("sglang-router", "0.3.2")) as z:
        z.extractall(tmp_path / "site")
    run = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path / "no-such-gateway")],
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1 and "no-such-gateway: No such file or directory" in run.stderr
