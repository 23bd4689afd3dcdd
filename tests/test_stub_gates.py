"""sgl_kernel is gated in every build: CUDA families declare the toolkit's driver stub (stub_imports), against which
every import gate's child imports, and sgl_kernel is one of them; ROCm builds import it plainly (HIP's runtime loads
without a device). With the real cu13 wheels cached (results/stub-gates/ says how they were fetched), the runner in a
driverless container imports sglang-kernel 0.4.5 against the real stub and fails a copy missing the op library it
loads."""

from __future__ import annotations

import json
import subprocess

import pytest
from support import ROOT

from toolkit.spec.catalog import load_catalog
from verify.config import from_dict

STUB = "/usr/local/cuda/lib64/stubs/libcuda.so"  # the CUDA bases' toolkit (CUDA_HOME=/usr/local/cuda)
CACHE = ROOT / ".cache" / "stub-gates"


def test_every_cuda_build_imports_sgl_kernel_against_the_stub():
    variants = load_catalog().variants.values()
    cuda = [v for v in variants if v.family == "cuda"]
    assert cuda
    for v in cuda:
        cfg = from_dict(v.gates, v.spec_file)  # the runner's own schema
        assert cfg["stub_imports"] == [STUB], v.name
        assert "sgl_kernel" in cfg["imports"] and "sgl_kernel" not in cfg["gpu_imports"], v.name
        # what reaches TransformerEngine's core at import runs in the build, against the stub
        assert {"transformer_engine", "megatron.core", "modelopt.torch"} <= set(cfg["imports"]), v.name
    for v in (v for v in variants if v.family == "rocm"):
        assert "sgl_kernel" in v.gates["imports"] and "stub_imports" not in v.gates, v.name


def _container(cfg_dir, *args: str) -> subprocess.CompletedProcess:
    image = "miles-base:bookworm-minbase-py311-git-gxx"
    mounts = [
        f"{CACHE / 'site'}:/site:ro",
        f"{CACHE / 'libcuda.so'}:{STUB}:ro",
        f"{ROOT / 'verify'}:/gates/verify:ro",
        f"{cfg_dir}:/gates/cfg:ro",
    ]
    volumes = [a for m in mounts for a in ("-v", m)]
    cmd = ["docker", "run", "--rm", "--network", "none", *volumes, "-e", "PYTHONPATH=/site", "-w", "/gates", image]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.docker
@pytest.mark.skipif(
    not (CACHE / "site" / "sgl_kernel").is_dir() or not (CACHE / "libcuda.so").is_file(),
    reason="the real sglang-kernel/torch install and the CUDA toolkit's stub are not cached in .cache/stub-gates/",
)
def test_the_real_sgl_kernel_imports_against_the_stub_and_a_broken_copy_fails(tmp_path):
    (tmp_path / "gates.json").write_text(json.dumps({"imports": ["sgl_kernel"], "stub_imports": {"stub": STUB}}))
    (tmp_path / "plain.json").write_text(json.dumps({"imports": ["sgl_kernel"]}))
    ok = _container(tmp_path, "python3", "-m", "verify", "--config", "cfg/gates.json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS  stub-import  %s" % STUB in ok.stdout
    assert "PASS  import      sgl_kernel  0.4.5" in ok.stdout
    plain = _container(tmp_path, "python3", "-m", "verify", "--config", "cfg/plain.json")
    assert plain.returncode == 1 and "Could not load any common_ops library" in plain.stdout, plain.stdout
    script = (
        "set -e; mkdir /tmp/b; cp -rs /site/sgl_kernel /tmp/b/; rm /tmp/b/sgl_kernel/sm100/common_ops.abi3.so; "
        "PYTHONPATH=/tmp/b:/site exec python3 -m verify --config cfg/gates.json"
    )
    broken = _container(tmp_path, "bash", "-c", script)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "FAIL  import      sgl_kernel" in broken.stdout and "/tmp/b/sgl_kernel" in broken.stdout
