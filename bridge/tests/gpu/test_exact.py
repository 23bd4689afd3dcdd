"""The forward's bits against sglang's own kernel, called directly on the same inputs (torch.equal), on the GPU.

Inputs include what changes rounding: logits so large that probabilities and outputs fall in the subnormal range,
v with exact zeros, 1-token sequences, cached prefixes, long rows. Each in-tree forward that can serve a class (the
Gluon forward and the Triton one) is checked, and so is the public path under `auto`.
"""

from __future__ import annotations

import pytest
import torch
from sglang_attn_bridge import attention_varlen, kernel_launches, layout, settings
from sglang_attn_bridge.scoring import Scoring
from sglang_attn_bridge.sglang_resolution import sglang_forward

LENS_Q = [3000, 700, 1, 64, 333]
LENS_K = [3000, 700, 1, 64, 1500]  # the last sequence has a 1167-token cached prefix


def _case(hq, hkv, d, dtype, spread, zeros, lens_q=LENS_Q, lens_k=LENS_K, seed=0):
    gen = torch.Generator().manual_seed(seed)
    tq, tk = sum(lens_q), sum(lens_k)
    q = (torch.randn(1, tq, hq, d, generator=gen) * spread).to("cuda", dtype)
    k = (torch.randn(1, tk, hkv, d, generator=gen) * spread).to("cuda", dtype)
    v = torch.randn(1, tk, hkv, d, generator=gen)
    if zeros:
        v = v * (torch.rand(v.shape, generator=gen) >= zeros)
    v = v.to("cuda", dtype)
    cu_q = torch.tensor([0] + lens_q).cumsum(0).to("cuda", torch.int32)
    cu_k = torch.tensor([0] + lens_k).cumsum(0).to("cuda", torch.int32)
    return q, k, v, cu_q, cu_k, layout.from_cu_seqlens(cu_q, cu_k, tq, tk)


def _equal(mine, theirs, what):
    diff = (mine.float() - theirs.float()).abs()
    bad = int((diff != 0).sum())
    assert torch.equal(mine, theirs), f"{what}: {bad} of {mine.numel()} elements differ, max |diff| {diff.max():.3g}"


INPUTS = [("ordinary", 1.0, 0.0), ("large logits, subnormal outputs", 16.0, 0.5)]
FLAGS = [("causal", True, None, 0.0), ("non-causal", False, None, 0.0), ("window", True, 255, 0.0)]
FLAGS += [("softcap", True, None, 30.0)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("flags", FLAGS, ids=[f[0] for f in FLAGS])
def test_in_tree_forwards_equal_sglang(sglang, dtype, d, flags):
    _, causal, window, softcap = flags
    if dtype == torch.float16 and (window is not None or softcap):
        pytest.skip("fp16 runs the same kernels as bf16 with window/softcap; one dtype of those suffices")
    for label, spread, zeros in INPUTS:
        for hq, hkv in ((32, 8), (8, 8)):
            q, k, v, *_, lay = _case(hq, hkv, d, dtype, spread, zeros)
            scale = d**-0.5
            theirs = sglang_forward(sglang, q, k, v, lay, Scoring.of(scale, causal, window, softcap))
            for gluon in (True, False):
                mine = kernel_launches.forward(q, k, v, lay, Scoring.of(scale, causal, window, softcap), gluon=gluon)[0]
                _equal(mine, theirs, f"{label} {hq}/{hkv} {'planned' if gluon else 'triton'} forward")


@pytest.mark.parametrize("d", [32, 80, 96, 256])
def test_other_head_dims_equal_sglang(sglang, d):
    for label, spread, zeros in INPUTS:
        q, k, v, *_, lay = _case(16, 4, d, torch.bfloat16, spread, zeros, [700, 1, 300], [700, 1, 500])
        theirs = sglang_forward(sglang, q, k, v, lay, Scoring(d**-0.5, True))
        mine = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))[0]
        _equal(mine, theirs, f"{label} D{d}")


@pytest.mark.parametrize("hq,hkv", [(8, 8), (16, 8), (16, 4), (32, 4)])
def test_gqa_ratios_equal_sglang(sglang, hq, hkv):
    q, k, v, *_, lay = _case(hq, hkv, 128, torch.bfloat16, 16.0, 0.5)
    theirs = sglang_forward(sglang, q, k, v, lay, Scoring(0.088, True))
    _equal(kernel_launches.forward(q, k, v, lay, Scoring(0.088, True))[0], theirs, f"{hq}/{hkv}")


def test_public_path_gives_sglang_bits_in_every_mode(sglang):
    """attention_varlen's output equals sglang's, under auto (probe decides), forced sglang and forced in-tree."""
    q, k, v, cu_q, cu_k, lay = _case(32, 8, 128, torch.bfloat16, 16.0, 0.5)
    theirs = sglang_forward(sglang, q, k, v, lay, Scoring(128**-0.5, True))
    for mode in ("auto", "sglang", "triton"):
        with settings.override(forward=mode):
            o = attention_varlen(q[0], k[0], v[0], cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
        _equal(o[None], theirs, f"forward={mode}")


def test_padded_batch_equals_sglang(sglang):
    """A padded [B, S] batch through the transformers function: its real tokens carry sglang's bits."""
    from sglang_attn_bridge.hf_attention import triton_attention_forward

    gen = torch.Generator().manual_seed(3)
    b, s, hq, hkv, d = 3, 512, 16, 4, 128
    q = (torch.randn(b, hq, s, d, generator=gen) * 8).to("cuda", torch.bfloat16)
    k = (torch.randn(b, hkv, s, d, generator=gen) * 8).to("cuda", torch.bfloat16)
    v = torch.randn(b, hkv, s, d, generator=gen).to("cuda", torch.bfloat16)
    mask = torch.ones(b, s, dtype=torch.bool, device="cuda")
    mask[1, :100] = False  # left padding
    mask[2, 400:] = False  # right padding
    module = torch.nn.Module()
    module.is_causal = True
    out, _ = triton_attention_forward(module, q, k, v, mask, scaling=d**-0.5)
    for row in range(b):
        idx = mask[row].nonzero()[:, 0]
        t = len(idx)
        cu = torch.tensor([0, t], dtype=torch.int32, device="cuda")
        qs, ks, vs = (x[row].transpose(0, 1)[idx][None] for x in (q, k, v))
        theirs = sglang_forward(sglang, qs, ks, vs, layout.from_cu_seqlens(cu, cu, t, t), Scoring(d**-0.5, True))
        _equal(out[row][idx][None], theirs, f"row {row}")


def test_fp32_output_is_sglangs(sglang):
    """fp32: the output is sglang's (TF32) bits, whatever the backward uses."""
    q, k, v, cu_q, cu_k, lay = _case(8, 2, 64, torch.float32, 1.0, 0.0, [300, 1], [300, 1])
    for t in (q, k, v):
        t.requires_grad_()
    theirs = sglang_forward(sglang, q, k, v, lay, Scoring(0.125, True))
    o = attention_varlen(q[0], k[0], v[0], cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, scale=0.125)
    _equal(o.detach()[None], theirs, "fp32")
