"""Kernel resolution against throwaway modules carrying each sglang generation's real signature.

Each fake kernel computes attention the way the real one does with its scale arguments (scores * sm_scale * k_scale,
output * v_scale), so a call that passes the wrong scale, or shifts positionals, gives a wrong answer or a TypeError.
"""

import pytest
import torch
from sglang_attn_bridge import attention_varlen, sglang_resolution
from sglang_attn_bridge.custom_op import attention
from sglang_attn_bridge.forward_selection import select_forward
from sglang_attn_bridge.reference import reference_varlen

OLD = "sglang.srt.layers.attention.triton_ops.extend_attention"  # where conftest.install_sglang puts fakes
NEW = "sglang.kernels.ops.attention.extend_attention"
calls = []


def _compute(
    q,
    o,
    k_buffer,
    v_buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    sm_scale,
    is_causal,
    k_scale=1.0,
    v_scale=1.0,
    sliding_window_size=-1,
    logit_cap=0.0,
):
    k = k_buffer[kv_indices]
    v = v_buffer[kv_indices]
    window = None if sliding_window_size < 0 else sliding_window_size + 1
    out = reference_varlen(
        q.double(),
        k.double(),
        v.double(),
        qo_indptr,
        kv_indptr,
        sm_scale * k_scale,
        causal=is_causal,
        window=window,
        softcap=logit_cap or None,
    )
    o.copy_(out * v_scale)


def v055(
    q,
    o,
    k_buffer,
    v_buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    prefix_lens,
    max_len_extend,
    custom_mask=None,
    mask_indptr=None,
    sm_scale=None,
    logit_cap=0.0,
    is_causal=True,
    sliding_window_size=-1,
    sinks=None,
    window_start_pos=None,
    xai_temperature_len=-1,
):
    calls.append(("0.5.5", sm_scale))
    _compute(
        q,
        o,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        sm_scale,
        is_causal,
        sliding_window_size=sliding_window_size,
        logit_cap=logit_cap,
    )


def v0510(
    q,
    o,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    qo_indptr,
    kv_indptr,
    kv_indices,
    prefix_lens,
    max_len_extend,
    custom_mask=None,
    mask_indptr=None,
    sm_scale=None,
    logit_cap=0.0,
    is_causal=True,
    sliding_window_size=-1,
    sinks=None,
    window_start_pos=None,
    xai_temperature_len=-1,
):
    calls.append(("0.5.10", sm_scale, k_scale, v_scale))
    _compute(
        q,
        o,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        sm_scale,
        is_causal,
        k_scale,
        v_scale,
        sliding_window_size,
        logit_cap,
    )


def v0523(
    q,
    o,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    qo_indptr,
    kv_indptr,
    kv_indices,
    prefix_lens,
    max_len_extend,
    custom_mask=None,
    mask_indptr=None,
    sm_scale=None,
    logit_cap=0.0,
    is_causal=True,
    sliding_window_size=-1,
    sinks=None,
    window_start_pos=None,
    xai_temperature_len=-1,
    page_size: int = 1,
    score_mod=None,
    aux_tensors=None,
):
    calls.append(("0.5.23", sm_scale, k_scale, v_scale))
    _compute(
        q,
        o,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        sm_scale,
        is_causal,
        k_scale,
        v_scale,
        sliding_window_size,
        logit_cap,
    )


GENERATIONS = [(OLD, v055, "<=0.5.5"), (OLD, v0510, "0.5.10-0.5.14"), (NEW, v0523, "0.5.16+")]


@pytest.mark.parametrize("module_name,fn,label", GENERATIONS)
def test_resolves_each_generation(install_sglang, module_name, fn, label):
    install_sglang(module_name, fn)
    calls.clear()
    res = sglang_resolution.resolve()
    assert res.kernel is not None, res.reason
    assert res.kernel.module == module_name and res.kernel.generation.startswith(label)
    assert select_forward() is res.kernel


@pytest.mark.parametrize("module_name,fn,label", GENERATIONS)
def test_bridge_forward_through_each_generation(install_sglang, module_name, fn, label):
    install_sglang(module_name, fn)
    calls.clear()
    lens = [30, 45]
    t = sum(lens)
    q, k, v = (torch.randn(1, t, h, 64) for h in (4, 2, 2))
    cu = torch.tensor([0, 30, 75], dtype=torch.int32)
    out = attention_varlen(q[0], k[0], v[0], cu_seqlens_q=cu, cu_seqlens_k=cu, window=9, softcap=4.0, scale=0.3)[None]
    ref = reference_varlen(q[0].double(), k[0].double(), v[0].double(), cu, cu, 0.3, window=10, softcap=4.0)
    assert torch.allclose(out[0].double(), ref, atol=1e-5)
    # the last call is the forward's (the probe ran first: this fake's fp64 output differs, so sglang's kernel runs)
    assert calls[-1][0] == {"<=0.5.5": "0.5.5", "0.5.10-0.5.14": "0.5.10", "0.5.16+": "0.5.23"}[label]
    assert calls[-1][1] == 0.3  # explicit sm_scale, never the kernel's 1/sqrt(D) default
    if len(calls[-1]) > 2:
        assert calls[-1][2:] == (1.0, 1.0)


def test_backward_runs_after_sglang_forward(install_sglang):
    install_sglang(NEW, v0523)
    q, k, v = (torch.randn(1, 40, h, 64, requires_grad=True) for h in (4, 2, 2))
    attention(q, k, v, 0.125).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_old_positional_call_fails_on_new_generations():
    """Upstream's 8-positional call style: fine on <= 0.5.5, a TypeError from 0.5.10 on (k_scale/v_scale shifted in)."""
    t = torch.zeros(4, 2, 64)
    idx = torch.arange(4)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    positional = (t, torch.empty_like(t), t, t, cu, cu, idx, torch.zeros(1, dtype=torch.int32), 4)
    import inspect

    inspect.signature(v055).bind(*positional)
    for fn in (v0510, v0523):
        with pytest.raises(TypeError):
            inspect.signature(fn).bind(*positional)
        with pytest.raises(TypeError):
            fn(*positional)


def test_unknown_signature_is_refused(bridge_settings, install_sglang, monkeypatch):
    def future(
        q,
        o,
        k_buffer,
        v_buffer,
        k_scale,
        v_scale,
        qo_indptr,
        kv_indptr,
        kv_indices,
        prefix_lens,
        max_len_extend,
        new_required_thing,
        sm_scale=None,
    ):
        raise AssertionError("must not be called")

    install_sglang(NEW, future)
    res = sglang_resolution.resolve()
    assert res.kernel is None and res.installed and "new_required_thing" in res.reason
    with pytest.raises(RuntimeError, match="SGLANG_ATTN_BRIDGE_FORWARD=triton"):
        select_forward()
    bridge_settings(forward="triton")
    assert select_forward() is None


def test_absent_sglang_uses_in_tree_kernel(bridge_settings, no_sglang, monkeypatch):
    bridge_settings(forward="auto")
    assert select_forward() is None
    bridge_settings(forward="sglang")
    with pytest.raises(RuntimeError):
        select_forward()
