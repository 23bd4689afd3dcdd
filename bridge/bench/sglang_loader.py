"""Load sglang's Triton extend-attention module from its wheel, with only what it needs.

Importing sglang's extend-attention module normally pulls sglang's package __init__s and `sglang.srt.utils` (heavy,
GPU-stack dependencies we cannot install offline). Here the real kernel files (0.5.16+: extend_attention,
decode_attention, score_mod and, where present, prefill_attention under sglang.kernels; earlier: extend_attention,
prefill_attention under sglang.srt) are extracted from the wheel unchanged and imported under their real module
names; only the package __init__s and the helper modules they import (`sglang.srt.environ`, `sglang.srt.utils`) are
stubbed. So sglang's own kernel code is what runs, and the bridge's normal resolution finds it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import tempfile
import types
import zipfile
from pathlib import Path

# (package inside the wheel, its kernel files): sglang 0.5.16+ keeps the kernel under sglang.kernels, earlier
# releases under sglang.srt. The first file must be there; the others are extracted where the wheel has them
# (0.5.16's extend_attention imports prefill_attention too).
LAYOUTS = (
    (
        "sglang/kernels/ops/attention",
        ("extend_attention.py", "decode_attention.py", "score_mod.py", "prefill_attention.py"),
    ),
    ("sglang/srt/layers/attention/triton_ops", ("extend_attention.py", "prefill_attention.py")),
)


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
        names = set(zf.namelist())
        version = next(
            (n.split("/")[0][len("sglang-") : -len(".dist-info")] for n in names if n.endswith(".dist-info/METADATA")),
            "?",
        )
        pkg, files = next((p, f) for p, f in LAYOUTS if f"{p}/{f[0]}" in names)
        for f in files:
            if f"{pkg}/{f}" in names:
                (root / f).write_bytes(zf.read(f"{pkg}/{f}"))
    parts = pkg.split("/")
    for i in range(1, len(parts)):
        _package(".".join(parts[:i]), None)
    if "sglang.srt" not in sys.modules:  # the stubbed helpers below live under it
        _package("sglang.srt", None)
    _package(".".join(parts), root)
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
    return importlib.import_module(f"{pkg.replace('/', '.')}.extend_attention")
