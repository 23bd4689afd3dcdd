"""GPU tests: the bridge's kernels against sglang's own kernel and float references, on a CUDA GPU.

Every test here carries the `gpu` marker (deselected by default; CI's CPU run never selects it) and is skipped without
a CUDA GPU or under the Triton interpreter. Run them from the repository root with the interpreter off:

    TRITON_INTERPRET=0 python3 -m pytest bridge/tests/gpu -m gpu

sglang's kernel is the installed sglang's, or, where sglang is not installed (the bench machine), the kernel files of
the wheel that SGLANG_WHEEL names or that lies in .whl/, loaded by bridge/bench/sglang_loader.py. Without either,
the tests that compare against sglang are skipped and say why.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"


def pytest_collection_modifyitems(config, items):
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if not GPU:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU with TRITON_INTERPRET unset or 0"))


def _load_sglang() -> str:
    """'' once sglang's kernel module is importable, else why not."""
    if importlib.util.find_spec("sglang") is not None:
        return ""
    wheels = [os.environ["SGLANG_WHEEL"]] if os.environ.get("SGLANG_WHEEL") else []
    wheels += sorted(glob.glob(str(ROOT / ".whl" / "sglang-*.whl")))
    if not wheels:
        return "no sglang installed, no SGLANG_WHEEL, no .whl/sglang-*.whl"
    sys.path.insert(0, str(ROOT / "bridge" / "bench"))
    from sglang_loader import load

    load(wheels[0])
    return ""


_SGLANG_MISSING = _load_sglang() if GPU else "no GPU"


@pytest.fixture(autouse=True)
def no_sglang():
    """Overrides the CPU tests' fixture: here the real sglang kernel (or none) is what resolution finds."""
    from sglang_attn_bridge import probe, sglang_resolution

    sglang_resolution.resolve(refresh=True)
    probe.clear()
    yield


@pytest.fixture
def sglang():
    """sglang's resolved kernel (a SglangKernel); skips the test when there is none."""
    if _SGLANG_MISSING:
        pytest.skip(_SGLANG_MISSING)
    from sglang_attn_bridge.sglang_resolution import resolve

    res = resolve(refresh=True)
    if res.kernel is None:
        pytest.fail(f"sglang is there but its kernel does not resolve: {res.reason}")
    return res.kernel
