"""dK/dV on Hopper in Gluon: the math of `backward.dkdv_kernel`, with the overlap Triton 3.6 does not emit.

Triton waits on every matrix product it does not accumulate right after issuing it, so inside a program the tensor
cores idle while the exponentials run. Here the products are issued by hand (`warpgroup_mma(is_async=True)`) so that
each elementwise step runs under a product still in flight:

    issue S^T = K Q^T and dP^T = V dO^T  ->  wait S^T;  P^T = exp2(S^T - LSE)   (under dP^T)
    issue dV += P^T dO                   ->  wait dP^T; dS^T = P^T (dP^T - D)   (under dV)
    issue dK += dS^T Q                   ->  wait all

and the next query tile (Q, dO) arrives by TMA into a second buffer while this one is used. One program owns
BLOCK_N keys of one KV head (K and V stay in shared memory; with PAIRS, two such blocks one after the other) and walks
every query head of its GQA group, as the Triton kernel does, in the same order, so each dK/dV is written by one
program (deterministic). Query tiles come through a descriptor bounded by the sequence, so rows past its end are
zeros and need no select.
Covers the common case only (causal or not, no window, no softcap, head dim 64/128, 16-bit types, heads of one
token adjacent in memory) on Triton 3.6, whose Gluon API this is written against (3.9 renamed the TMA copies and the
CTA barrier); kernel_plan.py sends everything else to the Triton kernel.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _issue_tile(
    q_desc, do_desc, q_buf, do_buf, bar, g, start_m, live, q_hrow, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr
):
    """Start the TMA copies of a step's Q and dO tiles (query head g of the group, rows from start_m) into a buffer.
    Query head g sits g * HEAD_DIM columns on in the descriptor when a token's heads are side by side (q_hrow 0),
    else g * q_hrow rows on (heads one after the other, each a whole sequence of rows)."""
    mbarrier.expect(bar, 2 * BLOCK_M * HEAD_DIM * q_desc.dtype.primitive_bitwidth // 8, pred=live)
    q_col = g * HEAD_DIM
    if q_hrow > 0:
        q_col = 0
    tma.async_copy_global_to_shared(q_desc, [start_m + g * q_hrow, q_col], bar, q_buf, pred=live)
    tma.async_copy_global_to_shared(do_desc, [start_m, g * HEAD_DIM], bar, do_buf, pred=live)


@gluon.jit
def _rows_seen(n0, prefix, len_q, IS_CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Query rows that can see the key block at n0: the first one, the first that sees all of it, the row blocks."""
    lo = 0
    if IS_CAUSAL:
        lo = gl.maximum(0, n0 - prefix) // BLOCK_M * BLOCK_M
    full_lo = lo
    if IS_CAUSAL:
        full_lo = gl.minimum(gl.maximum(lo, (n0 + BLOCK_N - 1 - prefix + BLOCK_M - 1) // BLOCK_M * BLOCK_M), len_q)
    return lo, full_lo, gl.maximum(len_q - lo + BLOCK_M - 1, 0) // BLOCK_M


@gluon.jit
def _tile(it, total_a, lo_a, nblk_a, lo_b, nblk_b, BLOCK_M: gl.constexpr):
    """(query head in the group, first row) of step `it`: the first key block's steps, then the second's."""
    second = (it >= total_a).to(gl.int32)
    i = it - second * total_a
    lo = lo_a + second * (lo_b - lo_a)
    nblk = gl.maximum(nblk_a + second * (nblk_b - nblk_a), 1)
    g = i // nblk
    return g, lo + (i - g * nblk) * BLOCK_M


@gluon.jit
def dkdv_sm90_kernel(
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
    skb,
    sks,
    skh,
    svb,
    svs,
    svh,
    sdob,
    sdos,
    sdkb,
    sdks,
    sdkh,
    sdvb,
    sdvs,
    sdvh,
    lse_sh,
    lse_sb,
    group,
    q_hrow,
    HEAD_DIM: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    PAIRS: gl.constexpr,
):
    if PAIRS:
        # grid (pair j, KV head, sequence): the program takes key block j, then block blocks-1-j. Under a causal mask
        # every program then has the same work, so the blocks of one (KV head, sequence) can launch side by side,
        # walking the same Q/dO tiles while L2 holds them, and one set-up (descriptors, barriers) serves two blocks.
        j = gl.program_id(0)
        kv_head = gl.program_id(1)
        seq = gl.program_id(2)
    else:
        # grid (KV head, sequence, key block j), block 0 the first keys, the ones every query row sees under a causal
        # mask: long programs launch first
        kv_head = gl.program_id(0)
        seq = gl.program_id(1)
        j = gl.program_id(2)
    len_k = gl.load(LenK + seq)
    blocks = (len_k + BLOCK_N - 1) // BLOCK_N
    jb = j
    if PAIRS:
        jb = blocks - 1 - j
    if (j > jb) | (j >= blocks):
        return
    len_q = gl.load(LenQ + seq)
    row = gl.load(Row + seq).to(gl.int64)
    q_start = gl.load(QStart + seq).to(gl.int64)
    k_start = gl.load(KStart + seq).to(gl.int64)
    prefix = len_k - len_q
    qk_scale2 = sm_scale * 1.4426950408889634
    dtype: gl.constexpr = Q.dtype.element_ty
    num_warps: gl.constexpr = gl.num_warps()

    # S^T tiles are [keys, query rows]: the keys are the MMA's M, split across the warps
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_M, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    rows_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    keys_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    kv_smem: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)

    # descriptors bounded by this sequence: TMA fills rows past its end with zeros. The query descriptor spans the
    # group's heads: side by side (column g * HEAD_DIM is head kv_head * group + g), or, with q_hrow > 0 (a
    # [B, H, S, D] q of whole rows, S a multiple of BLOCK_M: kernel_plan checks), one after the other, head g from
    # row g * q_hrow, so its tiles never reach the next head's rows and the last head's end is the bound.
    k_desc = tma.make_tensor_descriptor(
        K + row * skb + kv_head * skh + k_start * sks,
        shape=[len_k, HEAD_DIM],
        strides=[sks, 1],
        block_shape=[BLOCK_N, HEAD_DIM],
        layout=kv_smem,
    )
    v_desc = tma.make_tensor_descriptor(
        V + row * svb + kv_head * svh + k_start * svs,
        shape=[len_k, HEAD_DIM],
        strides=[svs, 1],
        block_shape=[BLOCK_N, HEAD_DIM],
        layout=kv_smem,
    )
    head0 = kv_head * group
    q_head = HEAD_DIM
    q_shape = [len_q, group * HEAD_DIM]
    if q_hrow > 0:
        q_head = q_hrow * sqs
        q_shape = [len_q + (group - 1) * q_hrow, HEAD_DIM]
    q_desc = tma.make_tensor_descriptor(
        Q + row * sqb + head0 * q_head + q_start * sqs,
        shape=q_shape,
        strides=[sqs, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
        layout=q_smem_layout,
    )
    do_desc = tma.make_tensor_descriptor(
        DO + row * sdob + head0 * HEAD_DIM + q_start * sdos,
        shape=[len_q, group * HEAD_DIM],
        strides=[sdos, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
        layout=q_smem_layout,
    )

    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_smem)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], kv_smem)
    q_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, HEAD_DIM], q_smem_layout)
    do_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, HEAD_DIM], q_smem_layout)
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=1)
    kv_bar = bars.index(2)
    gl.thread_barrier()

    count = 1 + (jb > j).to(gl.int32)
    n0_a = j * BLOCK_N
    n0_b = jb * BLOCK_N
    lo_a, full_a, nblk_a = _rows_seen(n0_a, prefix, len_q, IS_CAUSAL, BLOCK_M, BLOCK_N)
    lo_b, full_b, nblk_b = _rows_seen(n0_b, prefix, len_q, IS_CAUSAL, BLOCK_M, BLOCK_N)
    total_a = group * nblk_a
    total = total_a + (count - 1) * group * nblk_b

    kv_bytes: gl.constexpr = 2 * BLOCK_N * HEAD_DIM * dtype.primitive_bitwidth // 8
    mbarrier.expect(kv_bar, kv_bytes)
    tma.async_copy_global_to_shared(k_desc, [n0_a, 0], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [n0_a, 0], kv_bar, v_smem)
    g0, m0 = _tile(0, total_a, lo_a, nblk_a, lo_b, nblk_b, BLOCK_M)
    _issue_tile(
        q_desc, do_desc, q_smem.index(0), do_smem.index(0), bars.index(0), g0, m0, total > 0, q_hrow, BLOCK_M, HEAD_DIM
    )
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)

    for blk in range(count):
        n0 = n0_a + blk * (n0_b - n0_a)
        full_lo = full_a + blk * (full_b - full_a)
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=keys_layout)
        dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
        dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
        mbarrier.wait(kv_bar, blk & 1)
        for it in range(blk * total_a, total_a + blk * (total - total_a)):
            slot = it % 2
            # every warp is done with step it-1, the last reader of the other buffer: refill it with step it+1
            gl.thread_barrier()
            g_next, m_next = _tile(it + 1, total_a, lo_a, nblk_a, lo_b, nblk_b, BLOCK_M)
            _issue_tile(
                q_desc,
                do_desc,
                q_smem.index(1 - slot),
                do_smem.index(1 - slot),
                bars.index(1 - slot),
                g_next,
                m_next,
                it + 1 < total,
                q_hrow,
                BLOCK_M,
                HEAD_DIM,
            )
            g, start_m = _tile(it, total_a, lo_a, nblk_a, lo_b, nblk_b, BLOCK_M)
            offs_m = start_m + gl.arange(0, BLOCK_M, layout=rows_layout)
            stats = (head0 + g) * lse_sh + row * lse_sb + q_start + offs_m
            mask_m = offs_m < len_q
            lse2 = gl.load(LSE + stats, mask=mask_m, other=0.0) * 1.4426950408889634
            delta = gl.load(Delta + stats, mask=mask_m, other=0.0)
            q_buf = q_smem.index(slot)
            do_buf = do_smem.index(slot)
            mbarrier.wait(bars.index(slot), (it // 2) & 1)

            sT = warpgroup_mma(k_smem, q_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            dpT = warpgroup_mma(v_smem, do_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            sT = warpgroup_mma_wait(num_outstanding=1, deps=(sT,))
            pT = gl.exp2(sT * qk_scale2 - gl.expand_dims(lse2, 0))
            if IS_CAUSAL:
                if start_m < full_lo:
                    vis = gl.expand_dims(offs_m + prefix, 0) >= gl.expand_dims(offs_n, 1)
                    pT = gl.where(vis, pT, 0.0)
            p16 = gl.convert_layout(pT.to(dtype), op_layout)
            dv = warpgroup_mma(p16, do_buf, dv, is_async=True)
            dpT = warpgroup_mma_wait(num_outstanding=1, deps=(dpT,))
            dsT = pT * (dpT - gl.expand_dims(delta, 0))
            ds16 = gl.convert_layout(dsT.to(dtype), op_layout)
            dk = warpgroup_mma(ds16, q_buf, dk, is_async=True)
            dv, dk, p16, ds16 = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, p16, ds16))

        # every warp's products are done with K and V: the second block's arrive while this one is stored
        gl.thread_barrier()
        if blk + 1 < count:
            mbarrier.expect(kv_bar, kv_bytes)
            tma.async_copy_global_to_shared(k_desc, [n0_b, 0], kv_bar, k_smem)
            tma.async_copy_global_to_shared(v_desc, [n0_b, 0], kv_bar, v_smem)
        dk = dk * sm_scale
        offs_kn = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
        offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
        keep = gl.expand_dims(offs_kn < len_k, 1) & gl.expand_dims(offs_d < HEAD_DIM, 0)
        at = gl.expand_dims(k_start + offs_kn, 1)
        gl.store(DK + row * sdkb + kv_head * sdkh + at * sdks + gl.expand_dims(offs_d, 0), dk.to(dtype), mask=keep)
        gl.store(DV + row * sdvb + kv_head * sdvh + at * sdvs + gl.expand_dims(offs_d, 0), dv.to(dtype), mask=keep)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
