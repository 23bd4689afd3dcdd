"""The transformers-facing attention function: layouts, kwargs, and clear refusals."""

import pytest
import torch
from sglang_attn_bridge import BridgeUnsupported
from sglang_attn_bridge.hf_attention import triton_attention_forward
from sglang_attn_bridge.mask import triton_mask
from sglang_attn_bridge.reference import reference_attention
from torch import nn


class Mod(nn.Module):
    is_causal = True


def _qkv(b=1, s=48, hq=4, hkv=2, d=64, dtype=torch.float32):
    # the layouts transformers hands over: q/k [B, H, S, D] contiguous after RoPE, v a transposed view
    q = torch.randn(b, hq, s, d, dtype=dtype)
    k = torch.randn(b, hkv, s, d, dtype=dtype)
    v = torch.randn(b, s, hkv, d, dtype=dtype).transpose(1, 2)
    return q, k, v


def _ref(q, k, v, scale, **kw):
    return reference_attention(q.double(), k.double(), v.double(), scale, **kw).transpose(0, 1)


def test_output_layout_scaling_and_gqa():
    q, k, v = _qkv(b=2)
    out, weights = triton_attention_forward(Mod(), q, k, v, None, scaling=0.3)
    assert weights is None and out.shape == (2, 48, 4, 64)
    for b in range(2):
        assert torch.allclose(out[b].double(), _ref(q[b], k[b], v[b], 0.3), atol=1e-5)


def test_default_scaling_is_inverse_sqrt_head_dim():
    q, k, v = _qkv()
    out, _ = triton_attention_forward(Mod(), q, k, v, None)
    assert torch.allclose(out[0].double(), _ref(q[0], k[0], v[0], 64**-0.5), atol=1e-5)


def test_is_causal_false_and_module_window():
    q, k, v = _qkv()
    out, _ = triton_attention_forward(Mod(), q, k, v, None, scaling=0.2, is_causal=False)
    assert torch.allclose(out[0].double(), _ref(q[0], k[0], v[0], 0.2, causal=False), atol=1e-5)
    m = Mod()
    m.sliding_window = 7  # a module that has a window but does not pass it as a kwarg
    out, _ = triton_attention_forward(m, q, k, v, None, scaling=0.2)
    assert torch.allclose(out[0].double(), _ref(q[0], k[0], v[0], 0.2, window=7), atol=1e-5)


def test_position_ids_restarts_make_packed_sequences():
    q, k, v = _qkv(s=50)
    pos = torch.cat([torch.arange(20), torch.arange(30)])[None]
    out, _ = triton_attention_forward(Mod(), q, k, v, None, scaling=0.2, position_ids=pos)
    assert torch.allclose(out[0, :20].double(), _ref(q[0, :, :20], k[0, :, :20], v[0, :, :20], 0.2), atol=1e-5)
    assert torch.allclose(out[0, 20:].double(), _ref(q[0, :, 20:], k[0, :, 20:], v[0, :, 20:], 0.2), atol=1e-5)


def test_left_padding_mask():
    q, k, v = _qkv(b=2, s=40)
    mask = torch.ones(2, 40, dtype=torch.bool)
    mask[0, :9] = False
    out, _ = triton_attention_forward(Mod(), q, k, v, triton_mask(attention_mask=mask, kv_length=40), scaling=0.2)
    assert torch.allclose(out[0, 9:].double(), _ref(q[0, :, 9:], k[0, :, 9:], v[0, :, 9:], 0.2), atol=1e-5)
    assert (out[0, :9] == 0).all()
    assert torch.allclose(out[1].double(), _ref(q[1], k[1], v[1], 0.2), atol=1e-5)


def test_mask_function_contract():
    assert triton_mask(batch_size=1, attention_mask=None) is None
    m = torch.ones(1, 10, dtype=torch.bool)
    assert triton_mask(attention_mask=m, kv_length=6).shape == (1, 6)
    with pytest.raises(BridgeUnsupported, match="overlays"):
        triton_mask(attention_mask=None, use_vmap=True)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(dropout=0.1), "dropout"),
        (dict(s_aux=torch.zeros(4)), "sinks"),
        (dict(position_bias=torch.zeros(1)), "position bias"),
        (dict(sliding_window=1), "sliding_window"),
    ],
)
def test_refusals(kwargs, match):
    q, k, v = _qkv()
    m = Mod().train()
    with pytest.raises(BridgeUnsupported, match=match):
        triton_attention_forward(m, q, k, v, None, **kwargs)


def test_dropout_ignored_in_eval():
    q, k, v = _qkv()
    out, _ = triton_attention_forward(Mod().eval(), q, k, v, None, dropout=0.1, scaling=0.2)
    assert torch.allclose(out[0].double(), _ref(q[0], k[0], v[0], 0.2), atol=1e-5)


def test_refuses_4d_masks_holes_and_bad_shapes():
    q, k, v = _qkv(b=2, s=20)
    with pytest.raises(BridgeUnsupported, match="4D"):
        triton_attention_forward(Mod(), q, k, v, torch.zeros(2, 1, 20, 20))
    holes = torch.ones(2, 20, dtype=torch.bool)
    holes[0, 5] = False
    with pytest.raises(BridgeUnsupported, match="holes"):
        triton_attention_forward(Mod(), q, k, v, holes)
    with pytest.raises(BridgeUnsupported, match="head_dim"):
        triton_attention_forward(Mod(), *_qkv(d=320), None)
    with pytest.raises(BridgeUnsupported, match="dtypes"):
        triton_attention_forward(Mod(), *_qkv(dtype=torch.float64), None)
    with pytest.raises(BridgeUnsupported, match="must divide"):
        triton_attention_forward(Mod(), *_qkv(hq=3, hkv=2), None)
    with pytest.raises(BridgeUnsupported, match="chunked"):
        m = Mod()
        m.config = type("C", (), {"attention_chunk_size": 8})()
        triton_attention_forward(m, q, k, v, None)


def _grad_fns(t):
    """Every autograd node behind t, by class name."""
    seen, todo = [], [t.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.append(fn)
        todo += [nxt for nxt, _ in fn.next_functions]
    return [type(fn).__name__ for fn in seen]


def test_heads_first_route_gives_the_bits_of_the_sequence_first_one_without_transpose_nodes():
    """transformers' [B, H, S, D] tensors go into the eager Function as they are: the output and gradients are the
    ones the [B, S, H, D] route gives, bit for bit, and autograd records the Function and the leaves alone."""
    from sglang_attn_bridge import custom_op

    q, k, v = _qkv(b=2)
    do = torch.randn(2, 48, 4, 64)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = custom_op.attention(*leaves, 0.2, heads_first=True)
    assert sorted(set(_grad_fns(out))) == ["AccumulateGrad", "_EagerBackward"]
    out.backward(do)
    ref_leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref = custom_op.attention(*(t.transpose(1, 2) for t in ref_leaves), 0.2)
    ref.backward(do)
    assert torch.equal(out, ref)
    for mine, theirs in zip(leaves, ref_leaves):
        assert mine.grad.shape == mine.shape and torch.equal(mine.grad, theirs.grad)
