"""The bench's and GPU suite's sglang loader (bridge/bench/sglang_loader.py) on the real wheel of every sglang a
base carries: the kernel files it extracts import, and the bridge's own resolution finds sglang's kernel in them.

The GPU suite (bridge/tests/gpu) loads sglang this way wherever sglang is not installed (the H200 host); a loader
that misses a file of one release's layout stops the whole suite at its conftest, so each base's release is
loaded here, on the CPU, before a GPU run depends on it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT, sglang_wheel

from toolkit.spec.bases import all_bases

VERSIONS = sorted({b.sglang_version for b in all_bases().values() if b.sglang_version})
PROGRAM = """
import sys
from sglang_loader import load
module = load(sys.argv[1])
from sglang_attn_bridge.sglang_resolution import resolve
found = resolve(refresh=True)
assert found.kernel is not None, found.reason
print(module.__name__, found.kernel.generation, sep="|")
"""


def test_every_base_names_its_sglang():
    assert VERSIONS and len(VERSIONS) >= 2, VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_the_loader_gives_the_bridge_sglangs_kernel(version, tmp_path):
    wheel = sglang_wheel(version)
    env = {"PYTHONPATH": f"{ROOT / 'bridge' / 'src'}:{ROOT / 'bridge' / 'bench'}", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(wheel)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    module, generation = run.stdout.strip().splitlines()[-1].split("|")
    assert module.endswith(".extend_attention") and generation, run.stdout
