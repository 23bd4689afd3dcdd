"""dQ on Hopper in Gluon: the math of `backward.dq_kernel`, with the overlap Triton 3.6 does not emit.

As in `dkdv_sm90`, the products are issued by hand (`warpgroup_mma(is_async=True)`) so that the exponentials run
under a product still in flight instead of after Triton's wait on each one:

    issue S = Q K^T and dP = dO V^T  ->  wait S (and the last step's dQ);  P = exp2(S - LSE)   (under dP)
    wait dP;  dS = P (dP - D);  issue dQ += dS K   (runs on under the next step's loads and S, dP)

dS goes from the product's accumulator layout to the next product's register operand without a trip through shared
memory, and the next key tile (K, V) arrives by TMA into a second buffer while this one is used. One program owns
BLOCK_M query rows of one head (Q and dO stay in shared memory) and walks the key blocks in the Triton kernel's order,
unmasked ones first, so the sums are the same. Key tiles come through a descriptor bounded by the sequence, so rows
past its end are zeros; the select runs on the tiles where the Triton kernel applies it and nowhere else.
Covers the common case only (causal or not, no window, no softcap, head dim 64/128, 16-bit types); ops.py sends
everything else to the Triton kernel.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_init, warpgroup_mma_wait


@gluon.jit
def _issue_kv(k_desc, v_desc, k_buf, v_buf, bar, it, nblk, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Start the TMA copies of key block `it`'s K and V tiles into a buffer (nothing past the last block)."""
    live = it < nblk
    mbarrier.expect(bar, 2 * BLOCK_N * HEAD_DIM * k_desc.dtype.primitive_bitwidth // 8, pred=live)
    tma.async_copy_global_to_shared(k_desc, [it * BLOCK_N, 0], bar, k_buf, pred=live)
    tma.async_copy_global_to_shared(v_desc, [it * BLOCK_N, 0], bar, v_buf, pred=live)


@gluon.jit
def dq_sm90_kernel(
    Q, K, V, DO, DQ, LSE, Delta,
    Row, QStart, KStart, LenQ, LenK,
    sm_scale,
    sqb, sqs, sqh, skb, sks, skh, svb, svs, svh, sdob, sdos, sdoh, sdqb, sdqs, sdqh,
    lse_sh, lse_sb, group,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, IS_CAUSAL: gl.constexpr,
):
    # grid (query head, sequence, query block), block 0 the sequence's last rows: the ones that see the most keys
    # under a causal mask (varlen.query_block, which a Gluon kernel cannot call)
    head = gl.program_id(0)
    seq = gl.program_id(1)
    len_q = gl.load(LenQ + seq)
    m0 = (gl.cdiv(len_q, BLOCK_M) - 1 - gl.program_id(2)) * BLOCK_M
    if m0 < 0:
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

    # S and dP tiles are [query rows, keys]: the rows are the MMA's M, split across the warps
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    rows_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    keys_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    q_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_smem: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    # descriptors bounded by this sequence: TMA fills rows past its end with zeros
    q_desc = tma.make_tensor_descriptor(Q + row * sqb + head * sqh + q_start * sqs, shape=[len_q, HEAD_DIM],
                                        strides=[sqs, 1], block_shape=[BLOCK_M, HEAD_DIM], layout=q_smem_layout)
    do_desc = tma.make_tensor_descriptor(DO + row * sdob + head * sdoh + q_start * sdos, shape=[len_q, HEAD_DIM],
                                         strides=[sdos, 1], block_shape=[BLOCK_M, HEAD_DIM], layout=q_smem_layout)
    k_desc = tma.make_tensor_descriptor(K + row * skb + kv_head * skh + k_start * sks, shape=[len_k, HEAD_DIM],
                                        strides=[sks, 1], block_shape=[BLOCK_N, HEAD_DIM], layout=kv_smem)
    v_desc = tma.make_tensor_descriptor(V + row * svb + kv_head * svh + k_start * svs, shape=[len_k, HEAD_DIM],
                                        strides=[svs, 1], block_shape=[BLOCK_N, HEAD_DIM], layout=kv_smem)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_smem_layout)
    do_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_smem_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=1)
    q_bar = bars.index(2)
    gl.thread_barrier()

    # the Triton kernel's two loops, unmasked keys [0, full_hi) then masked [full_hi, hi), as one: block it is masked
    # when it starts at or past full_hi (full_hi is a multiple of BLOCK_N or equals hi)
    hi = len_k
    if IS_CAUSAL:
        hi = gl.minimum(len_k, prefix + gl.minimum(m0 + BLOCK_M, len_q))
    full_hi = len_k // BLOCK_N * BLOCK_N
    if IS_CAUSAL:
        full_hi = gl.minimum(full_hi, (prefix + m0 + 1) // BLOCK_N * BLOCK_N)
    full_hi = gl.maximum(gl.minimum(full_hi, hi), 0)
    nblk = gl.maximum(hi + BLOCK_N - 1, 0) // BLOCK_N

    mbarrier.expect(q_bar, 2 * BLOCK_M * HEAD_DIM * dtype.primitive_bitwidth // 8)
    tma.async_copy_global_to_shared(q_desc, [m0, 0], q_bar, q_smem)
    tma.async_copy_global_to_shared(do_desc, [m0, 0], q_bar, do_smem)
    _issue_kv(k_desc, v_desc, k_smem.index(0), v_smem.index(0), bars.index(0), 0, nblk, BLOCK_N, HEAD_DIM)

    offs_m = m0 + gl.arange(0, BLOCK_M, layout=rows_layout)
    mask_m = offs_m < len_q
    stats = head * lse_sh + row * lse_sb + q_start + offs_m
    lse2 = gl.load(LSE + stats, mask=mask_m, other=0.0) * 1.4426950408889634
    delta = gl.load(Delta + stats, mask=mask_m, other=0.0)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    dq = warpgroup_mma_init(gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout))
    ds16 = gl.zeros([BLOCK_M, BLOCK_N], dtype, op_layout)
    mbarrier.wait(q_bar, 0)

    for it in range(nblk):
        slot = it % 2
        start_n = it * BLOCK_N
        k_buf = k_smem.index(slot)
        v_buf = v_smem.index(slot)
        mbarrier.wait(bars.index(slot), (it // 2) & 1)

        s = warpgroup_mma(q_smem, k_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dp = warpgroup_mma(do_smem, v_buf.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s, dq, ds16 = warpgroup_mma_wait(num_outstanding=1, deps=(s, dq, ds16))
        gl.thread_barrier()
        _issue_kv(k_desc, v_desc, k_smem.index(1 - slot), v_smem.index(1 - slot), bars.index(1 - slot), it + 1,
                  nblk, BLOCK_N, HEAD_DIM)
        p = gl.exp2(s * qk_scale2 - gl.expand_dims(lse2, 1))
        if start_n >= full_hi:
            # backward._visible with no window, and the keys past the sequence's end
            offs_n = start_n + gl.arange(0, BLOCK_N, layout=keys_layout)
            qpos = gl.expand_dims(offs_m + prefix, 1)
            kpos = gl.expand_dims(offs_n, 0)
            vis = qpos >= 0
            if IS_CAUSAL:
                vis = vis & (qpos >= kpos)
            vis = vis & (kpos < len_k)
            p = gl.where(vis, p, 0.0)
        dp = warpgroup_mma_wait(num_outstanding=0, deps=(dp, ))
        ds = p * (dp - gl.expand_dims(delta, 1))
        ds16 = gl.convert_layout(ds.to(dtype), op_layout)
        dq = warpgroup_mma(ds16, k_buf, dq, is_async=True)

    dq, ds16 = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ds16))
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
    dq = dq * sm_scale
    offs_qm = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    keep = gl.expand_dims(offs_qm < len_q, 1) & gl.expand_dims(offs_d < HEAD_DIM, 0)
    at = gl.expand_dims(q_start + offs_qm, 1)
    gl.store(DQ + row * sdqb + head * sdqh + at * sdqs + gl.expand_dims(offs_d, 0), dq.to(DQ.dtype.element_ty),
             mask=keep)
