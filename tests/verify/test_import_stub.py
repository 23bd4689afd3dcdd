"""Where a config declares the driver stub (``stub_imports: {stub: PATH}``), every import gate's child imports
against it, so a module whose import chain reaches a driver-loading library (TransformerEngine's core, under
megatron.core and modelopt) imports as on a GPU host, without a hand list of which modules need it. No stub
declared: such a module fails, naming the OSError. This machine has no GPU driver."""

from __future__ import annotations

import _ctypes
import json

import pytest

from verify.config import ConfigError, from_dict
from verify.kinds.stub_import import cuda_driver

no_driver = pytest.mark.skipif(cuda_driver(), reason="a CUDA driver loads here: the stub is not used")

# A stand-in for TransformerEngine's core: it loads the driver library at import, as transformer_engine.common does
# (OSError "libcuda.so.1: cannot open shared object file" without a driver), and a module that imports it as
# megatron.core does through its extensions.
TE_STANDIN = {
    "te_standin/__init__.py": "import ctypes\n_lib = ctypes.CDLL('libcuda.so.1')\n",
    "uses_te.py": "import te_standin\n",
}
# Any library the loader accepts stands in for the toolkit's stub: the stand-in only loads it.
LOADABLE_SO = _ctypes.__file__


def _config(tmp_path, gates):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps(gates))
    return cfg


@no_driver
def test_a_declared_stub_serves_every_import(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path / "pkgs", TE_STANDIN)
    cfg = _config(tmp_path, {"imports": ["json", "uses_te"], "stub_imports": {"stub": LOADABLE_SO}})
    proc = run_verify("--config", cfg, pythonpath=[tmp_path / "pkgs"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.split()[2] for p in lines(proc, "PASS", "import")] == ["json", "uses_te"]
    (stub,) = lines(proc, "PASS", "stub-import")
    assert LOADABLE_SO in stub


@no_driver
def test_no_stub_declared_the_driver_loading_chain_fails_naming_the_oserror(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path / "pkgs", TE_STANDIN)
    proc = run_verify("--config", _config(tmp_path, {"imports": ["uses_te"]}), pythonpath=[tmp_path / "pkgs"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (fail,) = lines(proc, "FAIL", "import")
    assert "OSError" in fail and "libcuda.so.1" in fail, fail


@no_driver
def test_the_flag_declares_the_stub_too(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path / "pkgs", TE_STANDIN)
    proc = run_verify("--import", "uses_te", "--driver-stub", LOADABLE_SO, pythonpath=[tmp_path / "pkgs"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@no_driver
def test_a_missing_stub_fails_once_and_by_name(tmp_path, run_verify, write_tree, lines):
    missing = tmp_path / "no" / "libcuda.so"
    proc = run_verify("--config", _config(tmp_path, {"imports": ["json"], "stub_imports": {"stub": str(missing)}}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (fail,) = lines(proc, "FAIL")
    assert fail.split()[1] == "stub-import" and "driver stub %s is missing" % missing in fail, fail


def test_the_modules_list_is_gone_with_a_pointer_to_imports():
    with pytest.raises(ConfigError, match=r"key 'stub_imports.modules' .*imports"):
        from_dict({"stub_imports": {"stub": "/usr/local/cuda/lib64/stubs/libcuda.so", "modules": ["m"]}}, "gates.json")
