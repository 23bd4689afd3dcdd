"""The bit-exact forward on Hopper in Gluon: `forward.attn_fwd_kernel`'s arithmetic, with the overlap Triton 3.6 does
not emit.

Triton waits on S = Q K^T right after issuing it, so the exponentials of one tile and the product of the next never
run together inside a program. Here the next tile's scores are issued before this tile's softmax:

    issue S_j+1 = Q K_j+1^T  ->  softmax(S_j), acc *= rescale (under S_j+1)  ->  issue acc += P_j V_j  ->  wait both

with K and V tiles double-buffered by TMA. The per-row arithmetic is sglang's, op for op (scale after the dot, a
select before the max, natural exp, P V accumulated onto `acc * rescale`), and the tiles are the
same 64 keys taken in the same order, so the bits match sglang's kernel (bench/check_h200.py checks torch.equal).
Covers the common case (causal or not, no window, no softcap, head dim 64/128, 16-bit types) on Triton 3.6, whose
Gluon API this is written against; ops.py sends everything else to the Triton kernel.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _issue(desc, buf, bar, start, live, BLOCK: gl.constexpr, HEAD_DIM: gl.constexpr):
    mbarrier.expect(bar, BLOCK * HEAD_DIM * desc.dtype.primitive_bitwidth // 8, pred=live)
    tma.async_copy_global_to_shared(desc, [start, 0], bar, buf, pred=live)


@gluon.jit
def _softmax(qk, e_max, deno, start_n, full_hi, offs_m, prefix, len_k, sm_scale,
             BLOCK_N: gl.constexpr, IS_CAUSAL: gl.constexpr, INTERIOR: gl.constexpr):
    """sglang's online-softmax step on one tile of raw scores: (P, rescale, new max, new denominator)."""
    offs_n = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, qk.type.layout))
    qk = qk * sm_scale
    if start_n >= full_hi:  # a tile the mask cuts (or the bound): sglang's full select
        vis = gl.expand_dims(offs_n < len_k, 0)
        if IS_CAUSAL:
            vis = vis & (gl.expand_dims(offs_m + prefix, 1) >= gl.expand_dims(offs_n, 0))
        qk = gl.where(vis, qk, float("-inf"))
    elif INTERIOR == 1:  # a select on the bound alone keeps `qk * scale - max` from fusing into one FMA
        qk = gl.where(gl.expand_dims(offs_n < len_k, 0), qk, float("-inf"))
    row_max = gl.max(qk, 1)
    row_max = gl.where(row_max == float("-inf"), -1e20, row_max)
    n_e_max = gl.maximum(row_max, e_max)
    re_scale = gl.exp(e_max - n_e_max)
    p = gl.exp(qk - gl.expand_dims(n_e_max, 1))
    deno = deno * re_scale + gl.sum(p, 1)
    return p, re_scale, n_e_max, deno


@gluon.jit
def attn_fwd_sm90_kernel(
    Q, K, V, O, LSE,
    Row, QStart, KStart, LenQ, LenK,
    sm_scale, v_scale,
    sqb, sqs, sqh, skb, sks, skh, svb, svs, svh, sob, sos, soh,
    lse_sh, lse_sb, group,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, IS_CAUSAL: gl.constexpr,
    COMPUTE_O: gl.constexpr, INTERIOR: gl.constexpr,
):
    # grid (head, sequence, block), block 0 the sequence's last query block: the one that sees the most keys
    head = gl.program_id(0)
    seq = gl.program_id(1)
    len_q = gl.load(LenQ + seq)
    m0 = ((len_q + BLOCK_M - 1) // BLOCK_M - 1 - gl.program_id(2)) * BLOCK_M
    if m0 < 0:
        return
    len_k = gl.load(LenK + seq)
    row = gl.load(Row + seq).to(gl.int64)
    q_start = gl.load(QStart + seq).to(gl.int64)
    k_start = gl.load(KStart + seq).to(gl.int64)
    prefix = len_k - len_q
    kv_head = head // group
    dtype: gl.constexpr = Q.dtype.element_ty
    num_warps: gl.constexpr = gl.num_warps()

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    rows_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    q_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_smem: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)

    # descriptors bounded by the sequence: rows past its end arrive as zeros
    q_desc = tma.make_tensor_descriptor(Q + row * sqb + head * sqh + q_start * sqs, shape=[len_q, HEAD_DIM],
                                        strides=[sqs, 1], block_shape=[BLOCK_M, HEAD_DIM], layout=q_smem_layout)
    k_desc = tma.make_tensor_descriptor(K + row * skb + kv_head * skh + k_start * sks, shape=[len_k, HEAD_DIM],
                                        strides=[sks, 1], block_shape=[BLOCK_N, HEAD_DIM], layout=kv_smem)
    v_desc = tma.make_tensor_descriptor(V + row * svb + kv_head * svh + k_start * svs, shape=[len_k, HEAD_DIM],
                                        strides=[svs, 1], block_shape=[BLOCK_N, HEAD_DIM], layout=kv_smem)
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_smem_layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], kv_smem)
    # barriers: 0-1 K slots, 2-3 V slots, 4 Q
    bars = gl.allocate_shared_memory(gl.int64, [5, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(5):
        mbarrier.init(bars.index(i), count=1)
    gl.thread_barrier()

    lo = 0
    hi = len_k
    if IS_CAUSAL:
        hi = gl.minimum(len_k, prefix + gl.minimum(m0 + BLOCK_M, len_q))
    # tiles below full_hi are seen whole by every row of the block
    full_hi = lo
    if INTERIOR != 0:
        full_hi = hi // BLOCK_N * BLOCK_N
        if IS_CAUSAL:
            full_hi = gl.minimum(full_hi, (prefix + m0 + 1) // BLOCK_N * BLOCK_N)
        full_hi = gl.maximum(full_hi, lo)
    n = gl.maximum(hi - lo + BLOCK_N - 1, 0) // BLOCK_N

    _issue(q_desc, q_smem, bars.index(4), m0, True, BLOCK_M, HEAD_DIM)
    _issue(k_desc, k_smem.index(0), bars.index(0), lo, n > 0, BLOCK_N, HEAD_DIM)
    _issue(k_desc, k_smem.index(1), bars.index(1), lo + BLOCK_N, n > 1, BLOCK_N, HEAD_DIM)
    if COMPUTE_O:
        _issue(v_desc, v_smem.index(0), bars.index(2), lo, n > 0, BLOCK_N, HEAD_DIM)

    offs_m = m0 + gl.arange(0, BLOCK_M, layout=rows_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout)
    deno = gl.zeros([BLOCK_M], gl.float32, rows_layout)
    e_max = gl.zeros([BLOCK_M], gl.float32, rows_layout) - float("inf")

    mbarrier.wait(bars.index(4), 0)
    mbarrier.wait(bars.index(0), 0, pred=n > 0)
    qk = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False)
    for j in range(n):
        start_n = lo + j * BLOCK_N
        # every warp is done with tile j-1: refill its V slot with tile j+1 and K_j's slot with tile j+2
        gl.thread_barrier()
        if COMPUTE_O:
            _issue(v_desc, v_smem.index((j + 1) % 2), bars.index(2 + (j + 1) % 2), start_n + BLOCK_N, j + 1 < n,
                   BLOCK_N, HEAD_DIM)
        _issue(k_desc, k_smem.index(j % 2), bars.index(j % 2), start_n + 2 * BLOCK_N, j + 2 < n, BLOCK_N, HEAD_DIM)
        # the next tile's scores run on the tensor cores under this tile's softmax (the last step recomputes its
        # own, unused: one uniform loop body)
        nxt = gl.minimum(j + 1, n - 1)
        mbarrier.wait(bars.index(nxt % 2), (nxt // 2) & 1, pred=j + 1 < n)
        qk_next = warpgroup_mma(q_smem, k_smem.index(nxt % 2).permute((1, 0)), s_zero, use_acc=False,
                                is_async=True)
        p, re_scale, e_max, deno = _softmax(qk, e_max, deno, start_n, full_hi, offs_m, prefix, len_k, sm_scale,
                                            BLOCK_N, IS_CAUSAL, INTERIOR)
        if COMPUTE_O:
            # acc * rescale + P V with P V accumulated onto the rescaled acc by the tensor cores: the form Triton
            # (and so sglang's kernel) compiles that expression to, hence the same rounding
            acc = acc * gl.expand_dims(gl.convert_layout(re_scale, gl.SliceLayout(1, acc_layout)), 1)
            p16 = gl.convert_layout(p.to(dtype), op_layout)
            mbarrier.wait(bars.index(2 + j % 2), (j // 2) & 1)
            acc = warpgroup_mma(p16, v_smem.index(j % 2), acc, is_async=True)
            qk, acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(qk_next, acc, p16))
        else:
            qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk_next, ))

    for i in gl.static_range(5):
        mbarrier.invalidate(bars.index(i))
    mask_m = offs_m < len_q
    gl.store(LSE + head * lse_sh + row * lse_sb + q_start + offs_m, e_max + gl.log(deno), mask=mask_m)
    if COMPUTE_O:
        deno_o = gl.convert_layout(deno, gl.SliceLayout(1, acc_layout))
        o = acc / gl.expand_dims(deno_o, 1) * v_scale
        offs_om = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
        offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
        keep = gl.expand_dims(offs_om < len_q, 1) & gl.expand_dims(offs_d < HEAD_DIM, 0)
        gl.store(O + row * sob + head * soh + gl.expand_dims(q_start + offs_om, 1) * sos + gl.expand_dims(offs_d, 0),
                 o.to(dtype), mask=keep)
