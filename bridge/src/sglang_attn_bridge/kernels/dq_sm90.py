"""dQ on Hopper in Gluon: the math of `backward.dq_kernel`, with its products overlapped as in `dkdv_sm90.py`.

One program owns BLOCK_M query rows of one query head (Q and dO stay in shared memory; with PAIRS, two such blocks
one after the other) and walks the key blocks those rows see, in the Triton kernel's order, so each dQ row is
written by one program (deterministic). Per key block:

    issue S = Q K^T and dP = dO V^T  ->  wait S;  P = exp2(S - LSE)   (under dP)
    wait dP;  dS = P (dP - D)        ->  issue dQ += dS K
    next block: issue its S and dP   ->  wait for dQ and S together  (with DEFER: dQ runs under the next block's
                                                                      products instead of alone)

and the next K/V tile arrives by TMA into a second buffer while this one is used. Key tiles come through a
descriptor bounded by the sequence (keys past its end are zeros), but their scores are not: the key block that holds
the sequence's end, and the ones the causal mask cuts, are masked like the Triton kernel's. Covers what the Gluon
dK/dV kernel covers (causal or not, no window, no softcap, head dim 64/128, 16-bit types) on Triton 3.6.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)


@gluon.jit
def _issue_kv(k_desc, v_desc, k_smem, v_smem, bars, slot, start_n, live, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Start the TMA copies of the K and V tiles from key start_n into buffer `slot`."""
    bar = bars.index(slot)
    mbarrier.expect(bar, 2 * BLOCK_N * HEAD_DIM * k_desc.dtype.primitive_bitwidth // 8, pred=live)
    tma.async_copy_global_to_shared(k_desc, [start_n, 0], bar, k_smem.index(slot), pred=live)
    tma.async_copy_global_to_shared(v_desc, [start_n, 0], bar, v_smem.index(slot), pred=live)


@gluon.jit
def _refill(k_desc, v_desc, k_smem, v_smem, bars, it, steps_a, total, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Once every warp is done with step it-1, the last reader of the other buffer, refill it with step it+1's
    tiles (key block it+1 of the first query block, or it+1-steps_a of the second)."""
    gl.thread_barrier()
    nxt = it + 1 - (it + 1 >= steps_a).to(gl.int32) * steps_a
    _issue_kv(k_desc, v_desc, k_smem, v_smem, bars, 1 - it % 2, nxt * BLOCK_N, it + 1 < total, BLOCK_N, HEAD_DIM)


@gluon.jit
def _keys_seen(m0, prefix, len_q, len_k, IS_CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Key blocks that the rows from m0 see: (steps, first step that needs the mask), as `backward.dq_kernel`."""
    hi = len_k
    full_hi = len_k // BLOCK_N * BLOCK_N
    if IS_CAUSAL:
        hi = gl.minimum(len_k, prefix + gl.minimum(m0 + BLOCK_M, len_q))
        full_hi = gl.minimum(full_hi, (prefix + m0 + 1) // BLOCK_N * BLOCK_N)
    hi = gl.maximum(hi, 0)
    full_hi = gl.maximum(gl.minimum(full_hi, hi), 0)
    return (hi + BLOCK_N - 1) // BLOCK_N, full_hi // BLOCK_N


@gluon.jit
def dq_sm90_kernel(
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
    HEAD_DIM: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    PAIRS: gl.constexpr,
    DEFER: gl.constexpr,
):
    if PAIRS:
        # grid (pair j, query head, sequence): the program takes query block j, then block blocks-1-j, so under a
        # causal mask every program has the same work and the programs of one (head, sequence) launch side by side
        j = gl.program_id(0)
        head = gl.program_id(1)
        seq = gl.program_id(2)
    else:
        head = gl.program_id(0)
        seq = gl.program_id(1)
        j = gl.program_id(2)
    len_q = gl.load(LenQ + seq)
    blocks = (len_q + BLOCK_M - 1) // BLOCK_M
    if PAIRS:
        jb = blocks - 1 - j
    else:
        # block 0 of the grid is the sequence's last query block, the one that sees the most keys: long programs
        # launch first
        j = blocks - 1 - j
        jb = j
    if (j > jb) | (j < 0) | (j >= blocks):
        return
    len_k = gl.load(LenK + seq)
    row = gl.load(Row + seq).to(gl.int64)
    q_start = gl.load(QStart + seq).to(gl.int64)
    k_start = gl.load(KStart + seq).to(gl.int64)
    prefix = len_k - len_q
    kv_head = head // group
    qk_scale2 = sm_scale * 1.4426950408889634
    dtype: gl.constexpr = Q.dtype.element_ty
    num_warps: gl.constexpr = gl.num_warps()

    # S tiles are [query rows, keys]: the rows are the MMA's M, split across the warps
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    rows_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    keys_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    q_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_smem: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    # descriptors bounded by this sequence: TMA fills rows past its end with zeros
    q_desc = tma.make_tensor_descriptor(
        Q + row * sqb + head * sqh + q_start * sqs,
        shape=[len_q, HEAD_DIM],
        strides=[sqs, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
        layout=q_smem_layout,
    )
    do_desc = tma.make_tensor_descriptor(
        DO + row * sdob + head * sdoh + q_start * sdos,
        shape=[len_q, HEAD_DIM],
        strides=[sdos, 1],
        block_shape=[BLOCK_M, HEAD_DIM],
        layout=q_smem_layout,
    )
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

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_smem_layout)
    do_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_smem_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=1)
    q_bar = bars.index(2)
    gl.thread_barrier()

    count = 1 + (jb > j).to(gl.int32)
    m0_a = j * BLOCK_M
    m0_b = jb * BLOCK_M
    steps_a, full_a = _keys_seen(m0_a, prefix, len_q, len_k, IS_CAUSAL, BLOCK_M, BLOCK_N)
    steps_b, full_b = _keys_seen(m0_b, prefix, len_q, len_k, IS_CAUSAL, BLOCK_M, BLOCK_N)
    total = steps_a + (count - 1) * steps_b

    q_bytes: gl.constexpr = 2 * BLOCK_M * HEAD_DIM * dtype.primitive_bitwidth // 8
    mbarrier.expect(q_bar, q_bytes)
    tma.async_copy_global_to_shared(q_desc, [m0_a, 0], q_bar, q_smem)
    tma.async_copy_global_to_shared(do_desc, [m0_a, 0], q_bar, do_smem)
    # step it of the program: key block it of the first query block, then it - steps_a of the second
    _issue_kv(k_desc, v_desc, k_smem, v_smem, bars, 0, 0, total > 0, BLOCK_N, HEAD_DIM)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)

    for blk in range(count):
        m0 = m0_a + blk * (m0_b - m0_a)
        full = full_a + blk * (full_b - full_a)
        first = blk * steps_a
        offs_m = m0 + gl.arange(0, BLOCK_M, layout=rows_layout)
        mask_m = offs_m < len_q
        stats = head * lse_sh + row * lse_sb + q_start + offs_m
        lse2 = gl.load(LSE + stats, mask=mask_m, other=0.0) * 1.4426950408889634
        delta = gl.load(Delta + stats, mask=mask_m, other=0.0)
        dq = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout)
        if DEFER:  # the loop carries the product in flight
            dq = warpgroup_mma_init(dq)
        ds16 = gl.zeros([BLOCK_M, BLOCK_N], dtype, op_layout)  # with DEFER, the last dQ product's operand
        mbarrier.wait(q_bar, blk & 1)
        for it in range(first, first + steps_a + blk * (steps_b - steps_a)):
            slot = it % 2
            start_n = (it - first) * BLOCK_N
            if not DEFER:
                _refill(k_desc, v_desc, k_smem, v_smem, bars, it, steps_a, total, BLOCK_N, HEAD_DIM)
            k_buf = k_smem.index(slot)
            v_buf = v_smem.index(slot)
            mbarrier.wait(bars.index(slot), (it // 2) & 1)
            s = warpgroup_mma(q_smem, k_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            dp = warpgroup_mma(do_smem, v_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            if DEFER:
                # the previous step's dQ product and this S are done (only dP in flight): its K/V buffer is free
                dq, s, ds16 = warpgroup_mma_wait(num_outstanding=1, deps=(dq, s, ds16))
                _refill(k_desc, v_desc, k_smem, v_smem, bars, it, steps_a, total, BLOCK_N, HEAD_DIM)
            else:
                s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))
            p = gl.exp2(s * qk_scale2 - gl.expand_dims(lse2, 1))
            if it - first >= full:
                offs_n = start_n + gl.arange(0, BLOCK_N, layout=keys_layout)
                qpos = gl.expand_dims(offs_m + prefix, 1)
                kpos = gl.expand_dims(offs_n, 0)
                vis = (qpos >= 0) & (kpos < len_k)
                if IS_CAUSAL:
                    vis = vis & (qpos >= kpos)
                p = gl.where(vis, p, 0.0)
            dp = warpgroup_mma_wait(num_outstanding=0, deps=(dp,))
            ds = p * (dp - gl.expand_dims(delta, 1))
            ds16 = gl.convert_layout(ds.to(dtype), op_layout)
            dq = warpgroup_mma(ds16, k_buf, dq, is_async=True)
            if not DEFER:
                dq, ds16 = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ds16))
        dq, ds16 = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ds16))

        # every warp's products are done with Q and dO: the second block's arrive while this one is stored
        gl.thread_barrier()
        if blk + 1 < count:
            mbarrier.expect(q_bar, q_bytes)
            tma.async_copy_global_to_shared(q_desc, [m0_b, 0], q_bar, q_smem)
            tma.async_copy_global_to_shared(do_desc, [m0_b, 0], q_bar, do_smem)
        dq = dq * sm_scale
        offs_qm = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
        offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
        keep = gl.expand_dims(offs_qm < len_q, 1) & gl.expand_dims(offs_d < HEAD_DIM, 0)
        at = gl.expand_dims(q_start + offs_qm, 1)
        gl.store(DQ + row * sdqb + head * sdqh + at * sdqs + gl.expand_dims(offs_d, 0), dq.to(dtype), mask=keep)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
