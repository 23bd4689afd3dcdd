"""The front door: settings read once and overridden for a block, one error type per failure, attention_varlen's
FlashAttention-style arguments, and the version's one home."""

import re
from pathlib import Path

import pytest
import sglang_attn_bridge
import torch
from sglang_attn_bridge import (
    BridgeConfigError,
    BridgeError,
    BridgeUnsupported,
    SglangKernelError,
    attention_varlen,
    settings,
)
from sglang_attn_bridge.reference import reference_varlen
from sglang_attn_bridge.varlen_attention import _sglang_window


def test_environment_is_parsed_once_with_clear_errors():
    s = settings.from_environment(
        {"SGLANG_ATTN_BRIDGE_FORWARD": " Triton ", "SGLANG_ATTN_BRIDGE_ENABLE": "0", "TRITON_INTERPRET": "1"}
    )
    assert (s.forward, s.enable, s.interpreter, s.portable, s.probe_cache) == ("triton", False, True, False, None)
    assert settings.from_environment({}).enable is None
    with pytest.raises(BridgeConfigError, match="SGLANG_ATTN_BRIDGE_FORWARD='fast'"):
        settings.from_environment({"SGLANG_ATTN_BRIDGE_FORWARD": "fast"})
    with pytest.raises(BridgeConfigError, match="SGLANG_ATTN_BRIDGE_PORTABLE='maybe'"):
        settings.from_environment({"SGLANG_ATTN_BRIDGE_PORTABLE": "maybe"})
    # CUDA-graph replay is opt-in
    assert settings.from_environment({}).graphs is False
    assert settings.from_environment({"SGLANG_ATTN_BRIDGE_GRAPHS": "1"}).graphs is True


def test_graphs_setting_leaves_cpu_calls_uncaptured():
    """With `graphs` on, a call on the CPU (the interpreter) runs as without it and gives the same output."""
    from sglang_attn_bridge import graphs

    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(40, h, 32, generator=gen) for h in (4, 2, 2))
    cu = torch.tensor([0, 25, 40], dtype=torch.int32)
    xs = [x.clone().requires_grad_() for x in (q, k, v)]
    plain = attention_varlen(*xs, cu_seqlens_q=cu, cu_seqlens_k=cu)
    graphs.clear()
    with settings.override(graphs=True):
        assert not graphs.enabled(q)
        ys = [x.clone().requires_grad_() for x in (q, k, v)]
        other = attention_varlen(*ys, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert torch.equal(plain, other) and not graphs._entries


def test_a_changed_environment_changes_nothing_until_reloaded(monkeypatch):
    before = settings.current()
    monkeypatch.setenv("SGLANG_ATTN_BRIDGE_FORWARD", "sglang")
    assert settings.current() is before  # read once: no call reads os.environ


def test_override_nests_restores_and_refuses_unknown_fields():
    base = settings.current()
    with settings.override(forward="triton") as outer:
        assert settings.current() is outer and outer.forward == "triton"
        with settings.override(portable=True):
            assert settings.current().forward == "triton" and settings.current().portable
        assert not settings.current().portable
    assert settings.current() == base
    with pytest.raises(BridgeConfigError, match="unknown setting"):
        with settings.override(fwd="triton"):
            pass
    with pytest.raises(BridgeConfigError):
        with settings.override(forward="fast"):
            pass
    assert settings.current() == base


def test_error_types_are_one_per_failure_class():
    for cls in (BridgeUnsupported, BridgeConfigError, SglangKernelError):
        assert issubclass(cls, BridgeError)
    assert issubclass(BridgeUnsupported, NotImplementedError) and issubclass(BridgeUnsupported, ValueError)
    assert issubclass(BridgeConfigError, ValueError) and issubclass(SglangKernelError, RuntimeError)


def test_window_arguments_in_flash_attentions_form():
    assert _sglang_window(None, True) is None and _sglang_window((-1, -1), True) is None
    assert _sglang_window(7, True) == 7 and _sglang_window((7, 0), True) == 7 and _sglang_window((7, 7), False) == 7
    with pytest.raises(BridgeUnsupported, match="sglang's windows"):
        _sglang_window((7, 3), True)


def test_attention_varlen_matches_the_reference_and_refuses_bad_shapes():
    q, k, v = (torch.randn(50, h, 32, dtype=torch.float16) for h in (4, 2, 2))
    cu = torch.tensor([0, 20, 50], dtype=torch.int32)
    o = attention_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, window=(9, 0), softcap=5.0, scale=0.3)
    ref = reference_varlen(q.double(), k.double(), v.double(), cu, cu, 0.3, window=10, softcap=5.0)
    assert o.shape == q.shape and ((o.double() - ref).norm() / ref.norm()) < 3e-3
    with pytest.raises(BridgeUnsupported, match="packed"):
        attention_varlen(q[None], k[None], v[None], cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(BridgeUnsupported, match="must divide"):
        attention_varlen(q[:, :3], k, v, cu_seqlens_q=cu, cu_seqlens_k=cu)


def test_the_version_has_one_home():
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()  # the tree's, also when installed
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert 'dynamic = ["version"]' in project and not re.search(r"^version\s*=", project, re.M)
    assert 'version = {attr = "sglang_attn_bridge._version.__version__"}' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", sglang_attn_bridge.__version__)
