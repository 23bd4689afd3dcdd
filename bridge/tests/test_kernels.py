"""Forward and backward of the kernels against a float64 reference, on fresh random inputs per case.

Shapes are small because the kernels run in the Triton interpreter here; the same code runs on the GPU in bench/.
"""

import pytest
import torch
from sglang_attn_bridge import attention_varlen, layout
from sglang_attn_bridge.reference import reference_attention

TOL = {torch.float32: 2e-5, torch.float16: 3e-3}


def _rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def _packed_case(lens_q, lens_k, hq, hkv, d, dtype):
    """One packed row: sequences back to back (query and key lengths may differ: a cached prefix)."""
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(1, tq, hq, d, dtype=dtype)
    k = torch.randn(1, tk, hkv, d, dtype=dtype)
    v = torch.randn(1, tk, hkv, d, dtype=dtype)
    cu_q = torch.tensor([0] + lens_q).cumsum(0).int()
    cu_k = torch.tensor([0] + lens_k).cumsum(0).int()
    return q, k, v, layout.from_cu_seqlens(cu_q, cu_k, tq, tk), cu_q, cu_k


def _check(lens_q, lens_k, hq, hkv, d, dtype, scale, causal=True, hf_window=None, softcap=None, grad=True):
    q, k, v, lay, cu_q, cu_k = _packed_case(lens_q, lens_k, hq, hkv, d, dtype)
    for t in (q, k, v):
        t.requires_grad_(grad)
    o = attention_varlen(
        q[0],
        k[0],
        v[0],
        cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k,
        causal=causal,
        window=None if hf_window is None else hf_window - 1,
        softcap=softcap or 0.0,
        scale=scale,
    )[None]
    do = torch.randn_like(o)
    if grad:
        o.backward(do)
    ref_in = [t.detach().double().requires_grad_(grad) for t in (q, k, v)]
    ref = torch.zeros(1, sum(lens_q), hq, d, dtype=torch.float64)
    for b in range(len(lens_q)):
        qs, qe, ks, ke = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        r = reference_attention(
            ref_in[0][0, qs:qe].transpose(0, 1),
            ref_in[1][0, ks:ke].transpose(0, 1),
            ref_in[2][0, ks:ke].transpose(0, 1),
            scale,
            causal=causal,
            window=hf_window,
            softcap=softcap,
        )
        ref[0, qs:qe] = r.transpose(0, 1)
    assert torch.isfinite(o).all()
    assert _rel(o.detach(), ref.detach()) < TOL[dtype]
    if grad:
        ref.backward(do.double())
        for name, t, r in zip("qkv", (q, k, v), ref_in):
            assert torch.isfinite(t.grad).all(), name
            assert _rel(t.grad, r.grad) < 2 * TOL[dtype], name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("d", [64, 128])
def test_gqa_causal_packed(dtype, d):
    _check([37, 64, 90], [37, 64, 90], 4, 2, d, dtype, scale=d**-0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mha_non_causal_odd_lengths(dtype):
    _check([23, 70], [23, 70], 2, 2, 64, dtype, scale=0.2, causal=False)


@pytest.mark.parametrize("hf_window", [8, 40])
def test_sliding_window(hf_window):
    _check([100, 33], [100, 33], 4, 2, 64, torch.float32, scale=0.125, hf_window=hf_window)


def test_softcap_and_non_default_scaling():
    _check([80, 17], [80, 17], 4, 1, 64, torch.float32, scale=0.7, softcap=5.0)


def test_head_dim_not_power_of_two():
    _check([50], [50], 2, 2, 80, torch.float32, scale=80**-0.5)


def test_cached_prefix_forward():
    """Queries shorter than keys: causal aligned bottom-right (generation with a KV cache)."""
    _check([5, 1, 30], [40, 66, 30], 4, 2, 64, torch.float32, scale=0.125, grad=False)


def test_backward_with_prefix():
    _check([20, 64], [45, 64], 4, 2, 64, torch.float32, scale=0.125)


def test_forward_is_repeatable_and_lse_is_right():
    from sglang_attn_bridge import kernel_launches
    from sglang_attn_bridge.scoring import Scoring

    q, k, v, lay, _, _ = _packed_case([70], [70], 2, 1, 64, torch.float32)
    o1, lse1 = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True))
    o2, lse2 = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True))
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    s = torch.einsum("qhd,khd->hqk", q[0].double(), k[0].repeat_interleave(2, 1).double()) * 0.125
    s = s.masked_fill(torch.ones(70, 70, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.allclose(lse1.double(), torch.logsumexp(s, -1), atol=1e-5)
    _, lse3 = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True), compute_o=False)
    assert torch.allclose(lse3, lse1)


def test_non_exact_fast_variant_is_still_correct(monkeypatch):
    """The exp2/in-place-accumulate forward (a bench yardstick, off by default) computes the same function."""
    from sglang_attn_bridge import config

    monkeypatch.setattr(config, "INTERPRETER_FWD", config.FwdConfig(32, 64, 4, 1, interior=1, exact=False))
    _check([70, 33, 5], [70, 33, 5], 4, 2, 64, torch.float32, scale=0.2, grad=False)
    _check([64, 20], [64, 20], 4, 2, 64, torch.float32, scale=0.2, hf_window=10, grad=False)


@pytest.mark.parametrize("d", [64, 80])
def test_tma_tiles_give_the_same_bits(monkeypatch, d):
    """Tiles through TMA descriptors (sequence-bounded, zero-filled) and masked loads feed the same values: forward
    and backward results are bitwise equal, padded head dim and prefix included. Also checks that the fallback
    rule keeps misaligned views on the masked path."""
    from sglang_attn_bridge import config, kernel_launches, kernel_plan
    from sglang_attn_bridge.scoring import Scoring

    q, k, v, lay, _, _ = _packed_case([37, 5, 50], [37, 20, 50], 4, 2, d, torch.float32)
    results = []
    for tma in (False, True):
        monkeypatch.setattr(config, "INTERPRETER_FWD", config.FwdConfig(32, 64, 4, 1, tma=tma))
        monkeypatch.setattr(config, "INTERPRETER_BWD", config.BwdConfig(32, 32, 32, 32, 4, 1, tma=tma, tma2=tma))
        o, lse = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True))
        do = torch.randn_like(o, generator=torch.Generator().manual_seed(1))
        results.append((o, lse, *kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(0.125, True))))
    for name, a, b in zip(("o", "lse", "dq", "dk", "dv"), *results):
        assert torch.equal(a, b), name
    plan = kernel_plan.plan(q, k, v, do=do)
    assert plan.forward.tma and plan.dkdv.tma and plan.dq.tma  # the TMA path really ran above
    assert not kernel_plan.plan(q[..., 1:], k[..., 1:], v[..., 1:]).forward.tma  # 4-byte offset: not aligned
    monkeypatch.delattr(kernel_plan.tl, "make_tensor_descriptor")  # an older Triton: masked loads, no failure
    kernel_plan._target_of.cache_clear()  # the device's Target is worked out once; this Triton is a new one
    try:
        assert not kernel_plan.plan(q, k, v).forward.tma
    finally:
        kernel_plan._target_of.cache_clear()


def test_l2_groups_keep_their_keys_and_values_within_the_budget():
    """The Gluon forward's item order: pairs in groups whose K/V fit the L2 budget, never an empty group (the kernel
    divides by the group size), never more than there are pairs; no budget, one group."""
    from sglang_attn_bridge.kernel_launches import l2_group_pairs

    mib = 2**20
    assert l2_group_pairs(32, 8192, 128, 2, 4, 32) == 32  # 32/8 heads, 1x8192: 1 MiB per query head, all fit
    assert l2_group_pairs(64, 4096, 128, 2, 1, 32) == 16  # 16/16 heads, 4x4096: 2 MiB per pair
    assert l2_group_pairs(64, 4096, 128, 2, 1, 0) == 64
    assert l2_group_pairs(64, 1 << 20, 128, 2, 1, 1) == 1  # one pair alone is over the budget
    for pairs, max_k, d, group, mb in ((512, 1500, 128, 4, 32), (48, 829, 128, 4, 1), (7, 100, 64, 1, 24)):
        n = l2_group_pairs(pairs, max_k, d, 2, group, mb)
        assert 1 <= n <= pairs
        assert n * max_k * d * 2 * 2 / group <= mb * mib or n == 1
        assert n == pairs or (n + 1) * max_k * d * 2 * 2 / group > mb * mib  # as large as fits


def test_exp_ftz_is_ignored_off_nvidia(monkeypatch):
    """exp_ftz is inline PTX: off NVIDIA (the CPU interpreter here, also ROCm) the forward must take the plain exp,
    not fail to compile."""
    from sglang_attn_bridge import config, kernel_launches
    from sglang_attn_bridge.scoring import Scoring

    q, k, v, lay, _, _ = _packed_case([70, 33], [70, 33], 4, 2, 64, torch.float32)
    outs = []
    for ftz in (False, True):
        monkeypatch.setattr(config, "INTERPRETER_FWD", config.FwdConfig(32, 64, 4, 1, exp_ftz=ftz))
        outs.append(kernel_launches.forward(q, k, v, lay, Scoring(0.125, True)))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_interior_3_runs_as_interior_1_off_nvidia(monkeypatch):
    """interior=3 scales scores with inline PTX (mul.rn); off NVIDIA (here the CPU interpreter, also ROCm) the
    launcher must fall back to interior=1, the select that gives the same rounding, not fail."""
    from sglang_attn_bridge import config, kernel_launches
    from sglang_attn_bridge.scoring import Scoring

    q, k, v, lay, _, _ = _packed_case([70, 33], [70, 33], 4, 2, 64, torch.float32)
    outs = []
    for interior in (1, 3):
        monkeypatch.setattr(config, "INTERPRETER_FWD", config.FwdConfig(32, 64, 4, 1, interior=interior))
        outs.append(kernel_launches.forward(q, k, v, lay, Scoring(0.125, True)))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
