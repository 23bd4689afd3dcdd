"""A compiled torch extension imports in a fresh process only after torch (it finds libc10.so through the torch
already loaded): every runner imports torch first where torch is installed. A real extension, built here with
torch.utils.cpp_extension, fails a bare ``import`` and passes each runner's way of importing it: the runner
(the build's gate step and `build.py verify` both run ``python -m verify --config gates.json``), whose import
child runs with or without the driver stub, and the CST export's command."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from toolkit.gates.cst_export import to_cst

torch = pytest.importorskip("torch")
EXT = "tiny_torch_ext"
SOURCE = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice, "x * 2"); }
"""


@pytest.fixture(scope="module")
def ext_dir(tmp_path_factory):
    """The folder holding the built extension (about a minute: one C++ file against torch's headers)."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    from torch.utils.cpp_extension import load

    root = tmp_path_factory.mktemp("ext")
    (root / "tiny.cpp").write_text(SOURCE)
    load(name=EXT, sources=[str(root / "tiny.cpp")], build_directory=str(root), verbose=False)
    assert list(root.glob(EXT + "*.so")), sorted(p.name for p in root.iterdir())
    return root


def test_a_bare_import_fails_without_torch_first(ext_dir):
    bare = subprocess.run([sys.executable, "-c", "import " + EXT], cwd=ext_dir, capture_output=True, text=True)
    assert bare.returncode == 1 and "libc10.so: cannot open shared object file" in bare.stderr, bare.stderr


def test_the_runner_imports_it_first_thing(ext_dir, tmp_path, run_verify, lines):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"imports": [EXT]}))  # the only check: nothing else imported torch before it
    proc = run_verify("--config", cfg, pythonpath=[ext_dir])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(ext_dir) in lines(proc, "PASS", "import")[0]


def test_the_child_imports_it_against_the_stub_too(ext_dir, tmp_path, run_verify, lines):
    stub = tmp_path / "libcuda.so"
    stub.write_bytes(b"\x7fELF")  # nothing here loads libcuda: the child's torch-first rule is what is tested
    proc = run_verify("--import", EXT, "--driver-stub", stub, pythonpath=[ext_dir])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines(proc, "PASS", "import") and lines(proc, "PASS", "stub-import")


def test_the_cst_export_imports_it(ext_dir):
    (test,) = to_cst({"imports": [EXT]}, sys.executable)["commandTests"]
    proc = subprocess.run([test["command"], *test["args"]], cwd=ext_dir, capture_output=True, text=True)
    assert proc.returncode == test["exitCode"], proc.stderr
    assert all(re.search(rx, proc.stdout) for rx in test["expectedOutput"]), proc.stdout
