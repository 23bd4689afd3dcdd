"""Attention backward in Triton, FA2 form, deterministic (no atomics), one launch per kernel for a whole varlen batch.

  Delta = rowsum(dO * O);  P = exp(S - LSE);  dV = P^T dO;  dP = dO V^T;  dS = P * (dP - Delta);
  dQ = dS K * scale;  dK = dS^T Q * scale     (S = scale * Q K^T, softcapped when SOFTCAP > 0)

Three kernels: `delta_kernel`; `dkdv_kernel`, one program per (key block, KV head, sequence) that walks every query
head of its GQA group, so dK/dV of a KV head are summed in registers rather than by atomics or expanded K/V; and
`dq_kernel`, one program per (query block, query head, sequence). Recomputing S and dP in both costs two extra matrix
products but keeps every output written by exactly one program, hence bitwise repeatable.
Tiles that the causal mask cannot touch run without the mask select; rows past a sequence's end are loaded as zeros
(`tiles.load`), which contribute nothing (dO = 0, Q = 0), so only masking that changes values needs the select.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from . import tiles, varlen

# log2(e) is written out as a literal in the kernels: the interpreter mishandles constexpr globals.
# PRECISE (fp32 inputs on a GPU): P = exp(S * scale - LSE) in natural units with libdevice's correctly rounded-ish
# exp, not exp2 of log2(e)-scaled values through ex2.approx: their rounding, ~1e-6 relative in P, would put fp32
# gradients outside FlashAttention's rule against fp64. Half types keep exp2 (their rounding hides it). With PRECISE
# the LSE and Delta arrays are fp64 (ops.lse_dtype): S * scale - LSE, P and dS = P * (dP - Delta) are then formed in
# fp64 (Triton promotes), and only the products' operands are rounded to fp32; dQ, dK and dV add up the tiles'
# IEEE fp32 products in fp64, so the long sums over a sequence round once, not once per tile (measured on the H200:
# an fp64 LSE alone left dq/dk up to 1.6x over FlashAttention's bound against fp64).


@triton.jit
def _tanh(x, PRECISE: tl.constexpr = False):
    """The forward's tanh (kernels/forward.py): libdevice's under PRECISE, where 2 * sigmoid(2x) - 1 would cancel."""
    if PRECISE:
        return libdevice.tanh(x)
    else:
        return 2 * tl.sigmoid(2 * x) - 1


@triton.jit
def _exp2(x, PRECISE: tl.constexpr):
    """exp2(x), or with PRECISE exp(x) (the caller then works in natural units)."""
    if PRECISE:
        return libdevice.exp(x)
    else:
        return tl.exp2(x)


@triton.jit
def delta_kernel(
    O,
    DO,
    Delta,
    Row,
    QStart,
    LenQ,
    sob,
    sos,
    soh,
    sdb,
    sds,
    sdh,
    lse_sh,
    lse_sb,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    m0 = tl.program_id(0) * BLOCK_M
    head = tl.program_id(1)
    seq = tl.program_id(2)
    len_q = tl.load(LenQ + seq)
    if m0 >= len_q:
        return
    row = tl.load(Row + seq).to(tl.int64)
    q_start = tl.load(QStart + seq).to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m < len_q)[:, None] & (offs_d < HEAD_DIM)[None, :]
    tok = (q_start + offs_m)[:, None]
    o = tl.load(O + row * sob + head * soh + tok * sos + offs_d[None, :], mask=mask, other=0.0)
    do = tl.load(DO + row * sdb + head * sdh + tok * sds + offs_d[None, :], mask=mask, other=0.0)
    acc_t: tl.constexpr = Delta.dtype.element_ty  # fp64 for fp32 inputs on a GPU (the LSE's dtype), else fp32
    delta = tl.sum(o.to(acc_t) * do.to(acc_t), 1)
    tl.store(Delta + head * lse_sh + row * lse_sb + q_start + offs_m, delta, mask=offs_m < len_q)


@triton.jit
def _visible(offs_m, offs_n, prefix, IS_CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """[M, N] visibility of key offs_n to query offs_m (bounds excluded: those are handled by zero loads)."""
    qpos = offs_m[:, None] + prefix
    kpos = offs_n[None, :]
    vis = qpos >= 0
    if IS_CAUSAL:
        vis &= qpos >= kpos
    if WINDOW >= 0:
        vis &= qpos <= kpos + WINDOW
        if not IS_CAUSAL:
            vis &= kpos <= qpos + WINDOW
    return vis


@triton.jit
def _dkdv_step(
    dk,
    dv,
    k,
    v,
    q_rows,
    do_rows,
    lse_base,
    delta_base,
    start_m,
    offs_n,
    len_q,
    prefix,
    qk_scale2,
    sqs,
    sdos,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    MASK: tl.constexpr,
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    PRECISE: tl.constexpr = False,
):
    LOG2E: tl.constexpr = 1.0 if PRECISE else 1.4426950408889634
    offs_m = start_m + tl.arange(0, BLOCK_M)
    mask_m = offs_m < len_q
    q = tiles.load(q_rows, start_m, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    do = tiles.load(do_rows, start_m, len_q, sdos, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    lse2 = tl.load(lse_base + offs_m, mask=mask_m, other=0.0) * LOG2E
    delta = tl.load(delta_base + offs_m, mask=mask_m, other=0.0)
    sT = tl.dot(k, tl.trans(q), input_precision=DOT_PREC)  # [N, M]
    if SOFTCAP > 0:
        t = _tanh(sT * (qk_scale2 / LOG2E / SOFTCAP), PRECISE)
        pT = _exp2(SOFTCAP * LOG2E * t - lse2[None, :], PRECISE)
    else:
        pT = _exp2(sT * qk_scale2 - lse2[None, :], PRECISE)
    if MASK:
        vis = tl.trans(_visible(offs_m, offs_n, prefix, IS_CAUSAL, WINDOW))
        pT = tl.where(vis, pT, 0.0)
    dv += tl.dot(pT.to(do.dtype), do, input_precision=DOT_PREC)
    dpT = tl.dot(v, tl.trans(do), input_precision=DOT_PREC)
    dsT = pT * (dpT - delta[None, :])
    if SOFTCAP > 0:
        dsT = dsT * (1.0 - t * t)
    dk += tl.dot(dsT.to(q.dtype), q, input_precision=DOT_PREC)
    return dk, dv


@triton.jit
def dkdv_kernel(
    Q,
    K,
    V,
    DO,
    DK,
    DV,
    LSE,
    Delta,
    Row,
    QStart,
    KStart,
    LenQ,
    LenK,
    sm_scale,
    sqb,
    sqs,
    sqh,
    skb,
    sks,
    skh,
    svb,
    svs,
    svh,
    sdob,
    sdos,
    sdoh,
    sdkb,
    sdks,
    sdkh,
    sdvb,
    sdvs,
    sdvh,
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
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    PRECISE: tl.constexpr = False,
):
    LOG2E: tl.constexpr = 1.0 if PRECISE else 1.4426950408889634
    # grid (KV head, sequence, key block): block 0 holds the first keys, which every query row sees under a causal mask
    kv_head = tl.program_id(0)
    seq = tl.program_id(1)
    n0 = tl.program_id(2) * BLOCK_N
    len_k = tl.load(LenK + seq)
    if n0 >= len_k:
        return
    len_q = tl.load(LenQ + seq)
    row, q_start, k_start = varlen.offsets(seq, Row, QStart, KStart)
    prefix = len_k - len_q
    qk_scale2 = sm_scale * LOG2E

    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    k_rows = tiles.rows(K + row * skb + kv_head * skh + k_start * sks, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    v_rows = tiles.rows(V + row * svb + kv_head * svh + k_start * svs, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    k = tiles.load(k_rows, n0, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    v = tiles.load(v_rows, n0, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    if PRECISE:  # fp32: each tile's product in IEEE fp32, their sum over the query tiles in fp64
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float64)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float64)
    else:
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # query rows that can see this key block, and the part of them that sees all of it
    lo = 0
    hi = len_q
    if IS_CAUSAL:
        lo = tl.maximum(0, n0 - prefix) // BLOCK_M * BLOCK_M
        if WINDOW >= 0:
            hi = tl.minimum(len_q, n0 + BLOCK_N + WINDOW - prefix)
    full_lo = lo
    if IS_CAUSAL:
        full_lo = tl.minimum(tl.maximum(lo, tl.cdiv(n0 + BLOCK_N - 1 - prefix, BLOCK_M) * BLOCK_M), hi)
    if WINDOW >= 0:
        full_lo = hi

    for g in range(group):
        head = kv_head * group + g
        q_rows = tiles.rows(Q + row * sqb + head * sqh + q_start * sqs, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
        do_rows = tiles.rows(
            DO + row * sdob + head * sdoh + q_start * sdos, len_q, sdos, BLOCK_M, BLOCK_D, HEAD_DIM, TMA
        )
        lse_base = LSE + head * lse_sh + row * lse_sb + q_start
        delta_base = Delta + head * lse_sh + row * lse_sb + q_start
        for start_m in range(lo, full_lo, BLOCK_M):
            dk, dv = _dkdv_step(
                dk,
                dv,
                k,
                v,
                q_rows,
                do_rows,
                lse_base,
                delta_base,
                start_m,
                offs_n,
                len_q,
                prefix,
                qk_scale2,
                sqs,
                sdos,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_M,
                IS_CAUSAL,
                WINDOW,
                SOFTCAP,
                True,
                DOT_PREC,
                TMA,
                PRECISE,
            )
        for start_m in range(full_lo, hi, BLOCK_M):
            dk, dv = _dkdv_step(
                dk,
                dv,
                k,
                v,
                q_rows,
                do_rows,
                lse_base,
                delta_base,
                start_m,
                offs_n,
                len_q,
                prefix,
                qk_scale2,
                sqs,
                sdos,
                HEAD_DIM,
                BLOCK_D,
                BLOCK_M,
                IS_CAUSAL,
                WINDOW,
                SOFTCAP,
                False,
                DOT_PREC,
                TMA,
                PRECISE,
            )
    dk *= sm_scale
    kv_mask = (offs_n < len_k)[:, None] & (offs_d < HEAD_DIM)[None, :]
    tl.store(DK + row * sdkb + kv_head * sdkh + (k_start + offs_n)[:, None] * sdks + offs_d[None, :], dk, mask=kv_mask)
    tl.store(DV + row * sdvb + kv_head * sdvh + (k_start + offs_n)[:, None] * sdvs + offs_d[None, :], dv, mask=kv_mask)


@triton.jit
def _dq_step(
    dq,
    q,
    do,
    lse2,
    delta,
    k_rows,
    v_rows,
    start_n,
    offs_m,
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
    SOFTCAP: tl.constexpr,
    MASK: tl.constexpr,
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    PRECISE: tl.constexpr = False,
):
    LOG2E: tl.constexpr = 1.0 if PRECISE else 1.4426950408889634
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = tiles.load(k_rows, start_n, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    v = tiles.load(v_rows, start_n, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC)
    if SOFTCAP > 0:
        t = _tanh(s * (qk_scale2 / LOG2E / SOFTCAP), PRECISE)
        p = _exp2(SOFTCAP * LOG2E * t - lse2[:, None], PRECISE)
    else:
        p = _exp2(s * qk_scale2 - lse2[:, None], PRECISE)
    if MASK:
        vis = _visible(offs_m, offs_n, prefix, IS_CAUSAL, WINDOW) & (offs_n < len_k)[None, :]
        p = tl.where(vis, p, 0.0)
    dp = tl.dot(do, tl.trans(v), input_precision=DOT_PREC)
    ds = p * (dp - delta[:, None])
    if SOFTCAP > 0:
        ds = ds * (1.0 - t * t)
    dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PREC)
    return dq


@triton.jit
def dq_kernel(
    Q,
    K,
    V,
    DO,
    DQ,
    LSE,
    Delta,
    Row,
    QStart,
    KStart,
    LenQ,
    LenK,
    sm_scale,
    sqb,
    sqs,
    sqh,
    skb,
    sks,
    skh,
    svb,
    svs,
    svh,
    sdob,
    sdos,
    sdoh,
    sdqb,
    sdqs,
    sdqh,
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
    DOT_PREC: tl.constexpr,
    TMA: tl.constexpr,
    PRECISE: tl.constexpr = False,
):
    LOG2E: tl.constexpr = 1.0 if PRECISE else 1.4426950408889634
    head, seq, len_q, m0 = varlen.query_block(LenQ, BLOCK_M)
    if m0 < 0:
        return
    len_k = tl.load(LenK + seq)
    row, q_start, k_start = varlen.offsets(seq, Row, QStart, KStart)
    prefix = len_k - len_q
    kv_head = head // group
    qk_scale2 = sm_scale * LOG2E

    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < len_q
    q_rows = tiles.rows(Q + row * sqb + head * sqh + q_start * sqs, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    do_rows = tiles.rows(DO + row * sdob + head * sdoh + q_start * sdos, len_q, sdos, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    q = tiles.load(q_rows, m0, len_q, sqs, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    do = tiles.load(do_rows, m0, len_q, sdos, BLOCK_M, BLOCK_D, HEAD_DIM, TMA)
    lse2 = tl.load(LSE + head * lse_sh + row * lse_sb + q_start + offs_m, mask=mask_m, other=0.0) * LOG2E
    delta = tl.load(Delta + head * lse_sh + row * lse_sb + q_start + offs_m, mask=mask_m, other=0.0)
    k_rows = tiles.rows(K + row * skb + kv_head * skh + k_start * sks, len_k, sks, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    v_rows = tiles.rows(V + row * svb + kv_head * svh + k_start * svs, len_k, svs, BLOCK_N, BLOCK_D, HEAD_DIM, TMA)
    if PRECISE:  # as in dkdv_kernel: the sum over key tiles in fp64
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float64)
    else:
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    lo = 0
    hi = len_k
    if IS_CAUSAL:
        hi = tl.minimum(len_k, prefix + tl.minimum(m0 + BLOCK_M, len_q))
        if WINDOW >= 0:
            lo = tl.maximum(0, prefix + m0 - WINDOW) // BLOCK_N * BLOCK_N
    full_hi = lo
    if WINDOW < 0:
        full_hi = len_k // BLOCK_N * BLOCK_N
        if IS_CAUSAL:
            full_hi = tl.minimum(full_hi, (prefix + m0 + 1) // BLOCK_N * BLOCK_N)
        full_hi = tl.maximum(tl.minimum(full_hi, hi), lo)
    for start_n in range(lo, full_hi, BLOCK_N):
        dq = _dq_step(
            dq,
            q,
            do,
            lse2,
            delta,
            k_rows,
            v_rows,
            start_n,
            offs_m,
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
            SOFTCAP,
            False,
            DOT_PREC,
            TMA,
            PRECISE,
        )
    for start_n in range(full_hi, hi, BLOCK_N):
        dq = _dq_step(
            dq,
            q,
            do,
            lse2,
            delta,
            k_rows,
            v_rows,
            start_n,
            offs_m,
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
            SOFTCAP,
            True,
            DOT_PREC,
            TMA,
            PRECISE,
        )
    dq *= sm_scale
    qmask = mask_m[:, None] & (offs_d < HEAD_DIM)[None, :]
    tl.store(DQ + row * sdqb + head * sdqh + (q_start + offs_m)[:, None] * sdqs + offs_d[None, :], dq, mask=qmask)
