"""The `direct_launch` setting: on, a kernel launched before is relaunched through its compiled launcher; off, every
launch goes through Triton's own path; the same bits either way."""

import types

import pytest
import torch
from sglang_attn_bridge import BridgeConfigError, attention_varlen, launch, settings


def test_direct_launch_setting_reads_the_environment():
    assert settings.from_environment({}).direct_launch is True
    assert settings.from_environment({"SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH": "0"}).direct_launch is False
    assert settings.from_environment({"SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH": "on"}).direct_launch is True
    with pytest.raises(BridgeConfigError, match="SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH='sometimes'"):
        settings.from_environment({"SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH": "sometimes"})


class _FakeKernel:
    """What `launch` reads of a Triton JIT function, recording how it was launched."""

    __name__ = "fake"

    def __init__(self):
        self.calls = []
        self.params = [types.SimpleNamespace(is_constexpr=False)] * 2
        self.arg_names = ["a", "b"]
        self.signature = types.SimpleNamespace(parameters={})

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append(("triton", grid, args))

    def run(self, *args, grid, warmup, **kw):
        self.calls.append(("run", grid, args))
        return types.SimpleNamespace()


def test_direct_launch_off_sends_every_launch_through_triton(monkeypatch):
    monkeypatch.setattr(launch, "_kernels", {})
    fn = _FakeKernel()
    with settings.override(interpreter=False, direct_launch=False):
        launch.launch(fn, (3,), (1, 2), {}, ("sig",))
        launch.launch(fn, (3,), (1, 2), {}, ("sig",))
    assert fn.calls == [("triton", (3,), (1, 2))] * 2 and not launch._kernels
    with settings.override(interpreter=False, direct_launch=True):
        launch.launch(fn, (3,), (1, 2), {}, ("sig",))  # the first call of a key: Triton's run, then remembered
    assert fn.calls[-1] == ("run", (3,), (1, 2)) and (fn, ("sig",)) in launch._kernels


def test_direct_launch_off_gives_the_same_bits():
    gen = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(40, h, 32, generator=gen) for h in (4, 2, 2))
    do = torch.randn(40, 4, 32, generator=gen)
    cu = torch.tensor([0, 17, 40], dtype=torch.int32)
    got = []
    for direct in (True, False):
        with settings.override(direct_launch=direct):
            xs = [x.clone().requires_grad_() for x in (q, k, v)]
            o = attention_varlen(*xs, cu_seqlens_q=cu, cu_seqlens_k=cu, softcap=10.0)
            o.backward(do)
        got.append([o.detach(), *(x.grad for x in xs)])
    assert all(torch.equal(a, b) for a, b in zip(*got))
