"""A declared driver stub puts ``libcuda.so.1`` linked to it first on the library path of each import gate's child
alone: the runner's own environment never changes, the link's folder is gone afterwards, and with the CUDA 13.0
toolkit's real stub a module that loads libcuda at import passes where an import without the stub fails. This
machine has no GPU driver."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest
from support import ROOT

from toolkit.gates.cst_export import to_cst
from verify.config import ConfigError, from_dict
from verify.kinds.stub_import import cuda_driver

# The CUDA 13.0 toolkit's lib64/stubs/libcuda.so, copied from the H200 host (results/stub-gates/README.md says how);
# it stays out of git.
REAL_STUB = ROOT / ".cache" / "stub-gates" / "libcuda.so"
REAL_STUB_SHA256 = "67f959d1ab945005774464fcbf5a10722f97d0781b5800dd8636dc56747c2735"

no_driver = pytest.mark.skipif(cuda_driver(), reason="a CUDA driver loads here: the stub is not used")

# A module that reports, at import, the library path it was imported under and where libcuda.so.1 points there.
SEES_PATH = """
import json, os
path = os.environ.get("LD_LIBRARY_PATH", "")
first = path.split(os.pathsep)[0]
link = os.path.join(first, "libcuda.so.1")
seen = {"path": path, "folder": first, "listing": sorted(os.listdir(first)) if os.path.isdir(first) else None,
        "target": os.readlink(link) if os.path.islink(link) else None}
with open(os.environ["SEEN_FILE"], "w") as fh:
    json.dump(seen, fh)
"""

# A module that needs the driver API at import: it loads libcuda.so.1 and calls cuInit. A stub answers
# CUDA_ERROR_STUB_LIBRARY (34); no driver at all is an OSError, which fails the import.
NEEDS_LIBCUDA = """
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
rc = lib.cuInit(0)
assert rc in (0, 34), "cuInit returned %d" % rc
STUB = rc == 34
"""


def test_the_schema_names_its_keys():
    with pytest.raises(ConfigError, match=r"key 'stub_imports' must be an object with 'stub'"):
        from_dict({"stub_imports": ["sgl_kernel"]}, "gates.json")
    with pytest.raises(ConfigError, match=r"key 'stub_imports.stub' must be an absolute, normalised path"):
        from_dict({"stub_imports": {"stub": "lib64/stubs/libcuda.so"}}, "gates.json")
    with pytest.raises(ConfigError, match=r"key 'stub_imports.stub' must be an absolute, normalised path"):
        from_dict({"stub_imports": {"stub": "/s/lib\0cuda.so"}}, "gates.json")
    with pytest.raises(ConfigError, match=r"key 'stub_imports' must be an object with 'stub'"):
        from_dict({"stub_imports": {"stub": "/s/libcuda.so", "other": 1}}, "gates.json")
    value = {"stub": "/usr/local/cuda/lib64/stubs/libcuda.so"}
    assert from_dict({"stub_imports": value}, "gates.json").to_dict() == {"stub_imports": value}


def test_the_flag_needs_an_absolute_stub(run_verify):
    relative = run_verify("--import", "json", "--driver-stub", "stubs/libcuda.so")
    assert relative.returncode == 2 and "absolute, normalised" in relative.stderr, relative.stderr


@no_driver
def test_only_the_child_sees_the_link_and_it_is_removed(tmp_path, run_verify, write_tree, lines):
    stub = tmp_path / "toolkit" / "libcuda.so"
    stub.parent.mkdir()
    stub.write_bytes(b"\x7fELF")  # the link's target: this test reads the link, nothing loads it
    write_tree(tmp_path / "pkgs", {"sees_path.py": SEES_PATH})
    seen_file = tmp_path / "seen.json"
    env = {"LD_LIBRARY_PATH": "/opt/keep", "SEEN_FILE": str(seen_file)}
    proc = run_verify("--import", "sees_path", "--driver-stub", stub, pythonpath=[tmp_path / "pkgs"], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(stub) in lines(proc, "PASS", "stub-import")[0]
    seen = json.loads(seen_file.read_text())
    assert seen["path"] == seen["folder"] + ":/opt/keep"  # the private folder first, the image's path after it
    assert seen["listing"] == ["libcuda.so.1"] and seen["target"] == str(stub)
    assert not (tmp_path / seen["folder"]).exists(), "the link's folder outlived the gate"
    # the same module with no stub declared: the child's path is the image's, untouched
    proc = run_verify("--import", "sees_path", pythonpath=[tmp_path / "pkgs"], env=env)
    assert proc.returncode == 0 and json.loads(seen_file.read_text())["path"] == "/opt/keep"


@no_driver
@pytest.mark.skipif(not REAL_STUB.is_file(), reason="the CUDA toolkit's stub is not cached in .cache/stub-gates/")
def test_the_real_stub_lets_a_libcuda_module_import(tmp_path, run_verify, write_tree, lines):
    assert hashlib.sha256(REAL_STUB.read_bytes()).hexdigest() == REAL_STUB_SHA256
    write_tree(tmp_path, {"needs_libcuda.py": NEEDS_LIBCUDA})
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"imports": ["needs_libcuda"], "stub_imports": {"stub": str(REAL_STUB)}}))
    ok = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    plain = run_verify("--import", "needs_libcuda", pythonpath=[tmp_path])
    assert plain.returncode == 1 and "libcuda.so.1" in lines(plain, "FAIL", "import")[0], plain.stdout


@no_driver
def test_the_cst_export_runs_it_through_the_runner(tmp_path):
    """Each import is one CST test running our runner (carried as a zip) on a one-check config that carries the
    stub; its child finds the runner where the zip was unpacked."""
    stub = tmp_path / "libcuda.so"
    stub.write_bytes(b"\x7fELF")
    gates = {"imports": ["json", "no_such_module_xyz"], "stub_imports": {"stub": str(stub)}}
    tests = to_cst(gates, sys.executable)
    assert all(json.loads(t["args"][2])["stub_imports"] == {"stub": str(stub)} for t in tests["commandTests"])
    got = {}
    for test in tests["commandTests"]:
        proc = subprocess.run([test["command"], *test["args"]], capture_output=True, text=True, cwd=tmp_path)
        expected = proc.returncode == test["exitCode"] and all(
            re.search(rx, proc.stdout) for rx in test["expectedOutput"]
        )
        got[test["name"]] = expected
    assert got == {"stub-import %s" % stub: True, "import json": True, "import no_such_module_xyz": False}
