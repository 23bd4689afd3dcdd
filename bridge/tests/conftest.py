"""CPU test set-up: Triton kernels run in the interpreter, which must be chosen before triton is imported."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("SGLANG_ATTN_BRIDGE_FORWARD", "auto")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def no_sglang(monkeypatch):
    """Resolution sees no sglang, whatever the machine has installed (tests that need one install a fake)."""
    from sglang_attn_bridge import sglang_kernel

    from sglang_attn_bridge import probe

    monkeypatch.setattr(sglang_kernel, "_cached", sglang_kernel.Resolution(None, False, "disabled for the test"))
    monkeypatch.delenv(probe.CACHE_ENV, raising=False)
    probe.clear()  # probe decisions belong to one test's (fake) sglang
    yield
