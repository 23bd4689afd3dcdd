"""Attention forward in Triton, with the per-row arithmetic of sglang's `extend_attention_fwd_unified`.

Why this shape: the result bits of a forward are fixed by per-row arithmetic — 64-key tiles taken in order from key 0,
scores scaled after the dot, a select to -inf, natural exp, an fp32 running max/denominator, `acc * rescale + P·V` —
and by the matrix-instruction layout, not by how tiles are loaded. So this kernel keeps exactly that arithmetic and
changes only what does not touch the bits: keys are read straight from the [B, S, H, D] views (no index gather), the
loads are software-pipelined, tiles that are fully masked are skipped (they add exact zeros in sglang's kernel), and
it also writes the log-sum-exp that the backward needs. With COMPUTE_O off it computes only the log-sum-exp (used when
sglang's kernel produced the output).

One program: BLOCK_M query rows of one head of one sequence of a varlen batch (`varlen.py`). Causal masking is
bottom-right aligned (key j visible to query i iff j <= i + len_k - len_q); WINDOW uses sglang's convention (visible
iff i + prefix - j <= WINDOW), i.e. transformers' sliding_window - 1.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from . import tiles, varlen


@triton.jit
def _visible(offs_m, offs_kn, prefix, mask_m, mask_n, IS_CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """[M, N] keys visible to queries: in bounds, causal (bottom-right aligned), inside the window."""
    visible = mask_m[:, None] & mask_n[None, :]
    if IS_CAUSAL:
        visible &= (offs_m[:, None] + prefix) >= offs_kn[None, :]
    if WINDOW >= 0:
        visible &= (offs_m[:, None] + prefix) <= (offs_kn[None, :] + WINDOW)
        if not IS_CAUSAL:
            visible &= offs_kn[None, :] <= (offs_m[:, None] + prefix + WINDOW)
    return visible


@triton.jit
def _tanh(x, PRECISE: tl.constexpr = False):
    # the same tanh sglang's kernel uses, so softcapped scores round identically; PRECISE (fp32, for the backward):
    # libdevice's, since 2 * sigmoid(2x) - 1 cancels for small x (an absolute error of ~cap * 2^-24 in the exponent)
    if PRECISE:
        return libdevice.tanh(x)
    else:
        return 2 * tl.sigmoid(2 * x) - 1


@triton.jit
def _mul_rn(x, y):
    """x * y as a PTX mul.rn, which ptxas may not contract into an FMA with a later add: the rounding of the unfused
    multiply, without the select sglang's kernel puts in between (GPU only: inline PTX)."""
    return tl.inline_asm_elementwise(
        "mul.rn.f32 $0, $1, $2;", "=r,r,r", [x, tl.full(x.shape, y, tl.float32)], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def exp_ftz(x):
    """Natural exp as Triton lowers tl.exp (x * log2(e) rounded to fp32, then ex2.approx) but with results below
    2^-126 flushed to zero instead of made subnormal: three instructions fewer per score (GPU only: inline PTX). The
    output bits are sglang's wherever no output element's accumulator is itself below ~2^-100 (a subnormal
    probability adds nothing to a denominator of at least 1 nor to a larger accumulator); see config.exp_ftz."""
    return tl.inline_asm_elementwise(
        "{ .reg .f32 t; mul.f32 t, $1, 0f3FB8AA3B; ex2.approx.ftz.f32 $0, t; }",
        "=r,r",
        [x],
        dtype=tl.float32,
        is_pure=True,
        pack=1,
    )


@triton.jit
def _exp(x, FTZ: tl.constexpr, PRECISE: tl.constexpr):
    """sglang's exp (tl.exp: a multiply by log2(e), then ex2.approx); FTZ: the flushing variant (not exact);
    PRECISE: libdevice's exp, for fp32 inputs, whose forward serves the backward rather than matching sglang."""
    if PRECISE:
        return libdevice.exp(x)
    elif FTZ:
        return exp_ftz(x)
    else:
        return tl.exp(x)


@triton.jit
def _log(x, PRECISE: tl.constexpr):
    if PRECISE:
        return libdevice.log(x)
    else:
        return tl.log(x)


@triton.jit
def _fwd_tile(
    acc,
    deno,
    e_max,
    q,
    k_rows,
    v_rows,
    start_n,
    offs_m,
    offs_n,
    mask_m,
    len_k,
    prefix,
    sm_scale,
    sks,
    svs,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    COMPUTE_O: tl.constexpr,
    MASK: tl.constexpr,
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    EXP_FTZ: tl.constexpr,
    PRECISE: tl.constexpr,
):
    offs_kn = start_n + offs_n
    mask_n = offs_kn < len_k
    k = tiles.load(k_rows, start_n, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    qk = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)
    if MASK == 3 and SOFTCAP == 0:
        qk = _mul_rn(qk, sm_scale)
    else:
        qk *= sm_scale
    if SOFTCAP > 0:
        qk = SOFTCAP * _tanh(qk / SOFTCAP, PRECISE)
    if MASK == 1 or (MASK == 3 and SOFTCAP > 0):  # mul.rn alone did not keep softcapped scores' bits
        # a select on the key bound alone: every key here is visible, but keeping a select keeps the compiler
        # from fusing `qk * scale - max` into one FMA, which would round differently from sglang's kernel
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
    if MASK == 2:
        qk = tl.where(_visible(offs_m, offs_kn, prefix, mask_m, mask_n, IS_CAUSAL, WINDOW), qk, float("-inf"))
    row_max = tl.max(qk, 1)
    row_max = tl.where(row_max == float("-inf"), -1e20, row_max)
    n_e_max = tl.maximum(row_max, e_max)
    re_scale = _exp(e_max - n_e_max, EXP_FTZ, PRECISE)
    p = _exp(qk - n_e_max[:, None], EXP_FTZ, PRECISE)
    deno = deno * re_scale + tl.sum(p, 1)
    if COMPUTE_O:
        v = tiles.load(v_rows, start_n, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
        acc = acc * re_scale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
    return acc, deno, n_e_max


@triton.jit
def _fwd_tile_fast(
    acc,
    deno,
    e_max,
    q,
    k_rows,
    v_rows,
    start_n,
    offs_m,
    offs_n,
    mask_m,
    len_k,
    prefix,
    qk_scale2,
    sks,
    svs,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    COMPUTE_O: tl.constexpr,
    MASK: tl.constexpr,
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
):
    """Not bit-exact with sglang (exp2 with the scale folded in, P.V accumulated in place): the yardstick for what
    the exact arithmetic costs. e_max is kept in log2 units here."""
    offs_kn = start_n + offs_n
    mask_n = offs_kn < len_k
    k = tiles.load(k_rows, start_n, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    qk = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)
    if MASK:
        qk = tl.where(_visible(offs_m, offs_kn, prefix, mask_m, mask_n, IS_CAUSAL, WINDOW), qk, float("-inf"))
    m_new = tl.maximum(e_max, tl.max(qk, 1) * qk_scale2)
    m_new = tl.where(m_new == float("-inf"), -1e20, m_new)
    p = tl.math.exp2(qk * qk_scale2 - m_new[:, None])
    alpha = tl.math.exp2(e_max - m_new)
    deno = deno * alpha + tl.sum(p, 1)
    if COMPUTE_O:
        v = tiles.load(v_rows, start_n, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PREC)
    return acc, deno, m_new


@triton.jit
def attn_fwd_kernel(
    Q,
    K,
    V,
    O,
    LSE,
    Row,
    QStart,
    KStart,
    LenQ,
    LenK,
    sm_scale,
    v_scale,
    sqb,
    sqs,
    sqh,
    skb,
    sks,
    skh,
    svb,
    svs,
    svh,
    sob,
    sos,
    soh,
    lse_sh,
    lse_sb,
    group,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    COMPUTE_O: tl.constexpr,
    INTERIOR: tl.constexpr,
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    FAST: tl.constexpr = False,
    EXP_FTZ: tl.constexpr = False,
    PRECISE: tl.constexpr = False,
):
    head, seq, len_q, m0 = varlen.query_block(LenQ, BLOCK_M)
    if m0 < 0:
        return
    len_k = tl.load(LenK + seq)
    row, q_start, k_start = varlen.offsets(seq, Row, QStart, KStart)
    prefix = len_k - len_q
    kv_head = head // group

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < len_q
    mask_d = offs_d < HEAD_DIM

    q_rows = tiles.rows(Q + row * sqb + head * sqh + q_start * sqs, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    q = tiles.load(q_rows, m0, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    k_rows = tiles.rows(K + row * skb + kv_head * skh + k_start * sks, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    v_rows = tiles.rows(V + row * svb + kv_head * svh + k_start * svs, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)

    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    deno = tl.zeros([BLOCK_M], dtype=tl.float32)
    e_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")

    lo = 0
    hi = len_k
    if IS_CAUSAL:
        hi = tl.minimum(len_k, prefix + tl.minimum(m0 + BLOCK_M, len_q))
        if WINDOW >= 0:
            lo = tl.maximum(0, prefix + m0 - WINDOW) // BLOCK_N * BLOCK_N
    # tiles in [lo, full_hi) are visible to every row of the block and skip the mask select
    full_hi = lo
    if INTERIOR != 0 and WINDOW < 0:
        full_hi = hi // BLOCK_N * BLOCK_N
        if IS_CAUSAL:
            full_hi = tl.minimum(full_hi, (prefix + m0 + 1) // BLOCK_N * BLOCK_N)
        full_hi = tl.maximum(full_hi, lo)
    # interior tiles: 0 -> full select (2), 1 -> bound select (1), 2 -> none (0), 3 -> none, scale by mul.rn (3)
    INTERIOR_MASK: tl.constexpr = 3 if INTERIOR == 3 else 2 - INTERIOR
    if FAST:
        qk_scale2 = sm_scale * 1.4426950408889634
        for start_n in range(lo, full_hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, deno, e_max = _fwd_tile_fast(
                acc,
                deno,
                e_max,
                q,
                k_rows,
                v_rows,
                start_n,
                offs_m,
                offs_n,
                mask_m,
                len_k,
                prefix,
                qk_scale2,
                sks,
                svs,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_N,
                IS_CAUSAL,
                WINDOW,
                COMPUTE_O,
                False,
                DOT_PREC,
                TMA,
            )
        for start_n in range(full_hi, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, deno, e_max = _fwd_tile_fast(
                acc,
                deno,
                e_max,
                q,
                k_rows,
                v_rows,
                start_n,
                offs_m,
                offs_n,
                mask_m,
                len_k,
                prefix,
                qk_scale2,
                sks,
                svs,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_N,
                IS_CAUSAL,
                WINDOW,
                COMPUTE_O,
                True,
                DOT_PREC,
                TMA,
            )
        e_max = e_max * 0.6931471805599453  # back to natural-log units for the LSE
    else:
        for start_n in range(lo, full_hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, deno, e_max = _fwd_tile(
                acc,
                deno,
                e_max,
                q,
                k_rows,
                v_rows,
                start_n,
                offs_m,
                offs_n,
                mask_m,
                len_k,
                prefix,
                sm_scale,
                sks,
                svs,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_N,
                IS_CAUSAL,
                WINDOW,
                SOFTCAP,
                COMPUTE_O,
                INTERIOR_MASK,
                DOT_PREC,
                TMA,
                EXP_FTZ,
                PRECISE,
            )
        for start_n in range(full_hi, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, deno, e_max = _fwd_tile(
                acc,
                deno,
                e_max,
                q,
                k_rows,
                v_rows,
                start_n,
                offs_m,
                offs_n,
                mask_m,
                len_k,
                prefix,
                sm_scale,
                sks,
                svs,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_N,
                IS_CAUSAL,
                WINDOW,
                SOFTCAP,
                COMPUTE_O,
                2,
                DOT_PREC,
                TMA,
                EXP_FTZ,
                PRECISE,
            )

    lse_ptrs = LSE + head * lse_sh + row * lse_sb + q_start + offs_m
    if PRECISE:
        # fp32 inputs: the LSE array is fp64 and the sum is formed in fp64, since the rounding of an fp32 LSE
        # (~5e-7 absolute at LSE ~ 8) would be the largest error in the backward's P, and so in fp32 dQ/dK
        lse = e_max.to(tl.float64) + libdevice.log(deno.to(tl.float64))
    else:
        lse = e_max + _log(deno, PRECISE)
    tl.store(lse_ptrs, lse, mask=mask_m)
    if COMPUTE_O:
        o_ptrs = O + row * sob + head * soh + (q_start + offs_m)[:, None] * sos + offs_d[None, :]
        tl.store(o_ptrs, acc / deno[:, None] * v_scale, mask=mask_m[:, None] & mask_d[None, :])
