"""Load sglang's Triton extend-attention module from its wheel, with only what it needs.

Importing `sglang.kernels.ops.attention.extend_attention` normally pulls sglang's package __init__s and
`sglang.srt.utils` (heavy, GPU-stack dependencies we cannot install offline). Here the three real kernel files
(extend_attention, decode_attention, score_mod) are extracted from the wheel unchanged and imported under their real
module names; only the package __init__s and the two helper modules they import (`sglang.srt.environ`,
`sglang.srt.utils`) are stubbed. So sglang's own kernel code is what runs, and the bridge's normal resolution finds it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import tempfile
import types
import zipfile
from pathlib import Path

FILES = ("extend_attention.py", "decode_attention.py", "score_mod.py")
PKG = "sglang/kernels/ops/attention"


def _package(name: str, path: Path | None) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    mod.__path__ = [str(path)] if path else []
    sys.modules[name] = mod
    return mod


class _Env:
    def get(self):
        return False


class _Envs:
    def __getattr__(self, name):
        return _Env()


def load(wheel: str) -> types.ModuleType:
    import torch

    root = Path(tempfile.mkdtemp(prefix="sglang_kernels_"))
    with zipfile.ZipFile(wheel) as zf:
        version = next((n.split("/")[0][len("sglang-"):-len(".dist-info")] for n in zf.namelist()
                        if n.endswith(".dist-info/METADATA")), "?")
        for f in FILES:
            (root / f).write_bytes(zf.read(f"{PKG}/{f}"))
    for name in ("sglang", "sglang.kernels", "sglang.kernels.ops", "sglang.srt"):
        _package(name, None)
    _package("sglang.kernels.ops.attention", root)
    sys.modules["sglang"].__version__ = version
    environ = types.ModuleType("sglang.srt.environ")
    environ.envs = _Envs()
    sys.modules["sglang.srt.environ"] = environ
    utils = types.ModuleType("sglang.srt.utils")
    utils.is_cuda = lambda: torch.cuda.is_available() and torch.version.hip is None
    utils.is_hip = lambda: torch.version.hip is not None
    utils.is_gfx95_supported = lambda: False
    utils.is_gfx1250_supported = lambda: False
    utils.get_device_core_count = lambda *a: torch.cuda.get_device_properties(0).multi_processor_count
    sys.modules["sglang.srt.utils"] = utils
    version_mod = types.ModuleType("sglang.version")
    version_mod.__version__ = version
    sys.modules["sglang.version"] = version_mod
    return importlib.import_module(f"{PKG.replace('/', '.')}.extend_attention")
