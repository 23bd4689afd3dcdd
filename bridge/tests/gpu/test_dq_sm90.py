"""The Gluon dQ kernel against the Triton one, on the GPU: the same gradient bits on every layout it serves.

Both kernels sum a query row's key tiles in the same order with the same products, so their dQ must be equal, not
close; dK and dV come from the same dK/dV kernel either way. Each Gluon variant the config can ask for (query-block
pairs or not, the deferred dQ product or not, other tiles) is held to the same bits.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from sglang_attn_bridge import config, kernel_launches, kernel_plan, layout
from sglang_attn_bridge.scoring import Scoring

pytestmark = pytest.mark.skipif(kernel_plan.dq_sm90_kernel is None, reason="this Triton cannot define Gluon kernels")

CASES = [  # name, query lengths, key lengths, hq, hkv, d, dtype, causal, logit spread
    ("packed GQA D128", [1000, 1, 333, 700], None, 32, 8, 128, torch.bfloat16, True, 1.0),
    ("cached prefix", [3000, 700, 1, 64, 333], [3000, 700, 1, 64, 1500], 32, 8, 128, torch.bfloat16, True, 1.0),
    ("large logits", [700, 64, 1], None, 8, 2, 128, torch.bfloat16, True, 16.0),
    ("D64 MHA", [700, 64], None, 16, 16, 64, torch.bfloat16, True, 1.0),
    ("fp16 non-causal", [500, 300], None, 8, 8, 128, torch.float16, False, 1.0),
    ("fp16 D64 non-causal", [129, 64], [400, 64], 8, 4, 64, torch.float16, False, 1.0),
]
VARIANTS = {
    "committed": {},
    "no pairs": dict(gluon_dq_pairs=False),
    "dQ product not deferred": dict(gluon_dq_defer=False),
    "not deferred, no pairs": dict(gluon_dq_defer=False, gluon_dq_pairs=False),
}


@pytest.fixture
def gpu_tables(monkeypatch):
    monkeypatch.setattr(config, "GPU_BWD", dict(config.GPU_BWD))


def _inputs(lens_q, lens_k, hq, hkv, d, dtype, spread, seed):
    lens_k = lens_k or lens_q
    gen = torch.Generator().manual_seed(seed)
    tq, tk = sum(lens_q), sum(lens_k)
    q = (torch.randn(1, tq, hq, d, generator=gen) * spread).to("cuda", dtype)
    k = (torch.randn(1, tk, hkv, d, generator=gen) * spread).to("cuda", dtype)
    v = torch.randn(1, tk, hkv, d, generator=gen).to("cuda", dtype)
    do = torch.randn(1, tq, hq, d, generator=gen).to("cuda", dtype)
    cu_q = torch.tensor([0] + lens_q).cumsum(0).to("cuda", torch.int32)
    cu_k = torch.tensor([0] + lens_k).cumsum(0).to("cuda", torch.int32)
    return q, k, v, do, layout.from_cu_seqlens(cu_q, cu_k, tq, tk)


def _grads(q, k, v, do, lay, causal, d, bwd=None):
    if bwd is not None:
        config.GPU_BWD[d] = bwd
    o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, causal))
    return kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, causal))


def _equal(mine, theirs, what):
    diff = (mine.float() - theirs.float()).abs()
    assert torch.isfinite(mine).all(), f"{what}: not finite"
    assert torch.equal(mine, theirs), f"{what}: {int((diff != 0).sum())} elements differ, max |diff| {diff.max():.3g}"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gluon_dq_gives_the_triton_kernels_bits(gpu_tables, case):
    name, lens_q, lens_k, hq, hkv, d, dtype, causal, spread = case
    q, k, v, do, lay = _inputs(lens_q, lens_k, hq, hkv, d, dtype, spread, seed=len(name))
    committed = config.GPU_BWD[d]
    assert kernel_plan.plan(q, k, v, do=do).dq.kernel == "gluon"
    triton_dq, dk0, dv0 = _grads(q, k, v, do, lay, causal, d, replace(committed, gluon_dq=()))
    for vname, changes in VARIANTS.items():
        dq, dk, dv = _grads(q, k, v, do, lay, causal, d, replace(committed, **changes))
        _equal(dq, triton_dq, f"{name}, {vname}: dq")
        _equal(dk, dk0, f"{name}, {vname}: dk")
        _equal(dv, dv0, f"{name}, {vname}: dv")


def test_gluon_dq_reads_transformers_head_major_layout(gpu_tables):
    """A [B, H, S, D] q and dO (transformers' layout, as views) with a plain batch: the kernel's descriptors follow
    the strides, and the gradient is the Triton kernel's."""
    gen = torch.Generator().manual_seed(3)
    b, s, hq, hkv, d = 2, 1100, 16, 4, 128
    q, do = (torch.randn(b, hq, s, d, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2) for _ in range(2))
    k, v = (torch.randn(b, hkv, s, d, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2) for _ in range(2))
    lay = layout.dense(b, s, s, q.device)
    committed = config.GPU_BWD[d]
    assert kernel_plan.plan(q, k, v, do=do, whole_rows=True).dq.kernel == "gluon"
    theirs = _grads(q, k, v, do, lay, True, d, replace(committed, gluon_dq=()))[0]
    mine = _grads(q, k, v, do, lay, True, d, committed)[0]
    _equal(mine, theirs, "head-major dq")
