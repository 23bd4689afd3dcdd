"""The `direct_launch` setting: on, a kernel launched before is relaunched through its compiled launcher; off, every
launch goes through Triton's own path. That both give the same bits needs a GPU (tests/gpu/test_launch.py): under
the interpreter every launch takes Triton's path."""

import types

import pytest
from sglang_attn_bridge import BridgeConfigError, launch, settings


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
