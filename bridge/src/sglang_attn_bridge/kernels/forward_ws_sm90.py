"""The bit-exact forward on Hopper, warp-specialised in Gluon: `forward.attn_fwd_kernel`'s arithmetic on FA3's schedule.

Triton's forward keeps the tensor cores half idle: each warp waits on its own S = Q K^T before its softmax and on
its P V before the next tile, and its softmax (sglang's: about eleven instructions per score) competes for issue slots
with too few other warps. Here a persistent program (one per multiprocessor) takes work items of 3 x 64 query rows
from a global counter, heaviest first, and its warps take separate jobs:

* a producer warpgroup (24 registers; one thread issues) takes the next item from the counter and hands it to the
  consumers through a 2-slot ring in shared memory, builds its TMA descriptors and streams its Q tiles and K/V tiles
  into a ring of STAGES slots, running ahead into the next item while the consumers finish one;
* three consumer warpgroups own 64 rows each. Per tile a consumer issues S_j = Q K_j^T and acc += P_j-1 V_j-1 back
  to back, then runs softmax(S_j); three of them (one warp each per scheduler) keep the tensor cores fed while the
  others' softmaxes run. (The source waits for P_j-1 V_j-1 after the softmax, FA3's overlap inside a warpgroup,
  but ptxas moves that wait above it: docs/bridge-h200.md.)

A counter balances better than a fixed stride (a program that drew light items takes more: most of what it gained
on the H200), and the (sequence, head) pairs go in groups whose K/V fit in L2 (`FwdConfig.gluon_group_mb`), so the
items in flight share keys.

The per-row arithmetic is sglang's op for op (scale after the dot, natural exp, fp32 running max and denominator,
P V accumulated onto `acc * rescale` by the tensor cores: the form Triton compiles sglang's expression to), over the
same 64-key tiles in the same order, so the output bits equal sglang's kernel (bench/check_h200.py checks
torch.equal; EXP_FTZ below is the one caveat). Under a causal mask a consumer stops at its own last visible tile:
the tiles after it are exact no-ops for its rows (rescale 1, P 0), as they are in sglang's kernel. Covers causal or
not, no window, no softcap, head dim 64/128, 16-bit types, Triton 3.6's Gluon API; kernel_plan.py sends everything
else to the Triton kernel.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

CONSUMERS = gl.constexpr(3)  # warpgroups of 64 rows: 4 warpgroups with the producer fill the register file at 128
BLOCK_M = gl.constexpr(64)
BLOCK_N = gl.constexpr(64)  # sglang's key tile: it fixes the order of the softmax sums
ROWS = gl.constexpr(
    CONSUMERS.value * BLOCK_M.value
)  # query rows of one work item (kernel_launches.py sizes the grid by it)


@gluon.jit
def _load(desc, buf, bar, row, BLOCK: gl.constexpr, HEAD_DIM: gl.constexpr, pred=True):
    mbarrier.expect(bar, BLOCK * HEAD_DIM * desc.dtype.primitive_bitwidth // 8, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, 0], bar, buf, pred=pred)


@gluon.jit
def _exp(x, EXP_FTZ: gl.constexpr):
    """Natural exp as Triton lowers it; EXP_FTZ: the same with ex2.approx.ftz, as `forward.exp_ftz` (why it keeps the
    bits: there)."""
    if EXP_FTZ:
        return gl.inline_asm_elementwise(
            "{ .reg .f32 t; mul.f32 t, $1, 0f3FB8AA3B; ex2.approx.ftz.f32 $0, t; }",
            "=r,r",
            [x],
            dtype=gl.float32,
            is_pure=True,
            pack=1,
        )
    else:
        return gl.exp(x)


@gluon.jit
def _mul_rn(x, y):
    """x * y as a PTX mul.rn, which ptxas may not contract into an FMA with the later subtraction (forward.py)."""
    return gl.inline_asm_elementwise(
        "mul.rn.f32 $0, $1, $2;",
        "=r,r,r",
        [x, gl.full(x.shape, y, gl.float32, x.type.layout)],
        dtype=gl.float32,
        is_pure=True,
        pack=1,
    )


@gluon.jit
def _softmax(
    qk,
    e_max,
    deno,
    start_n,
    full_hi,
    offs_m,
    prefix,
    len_k,
    sm_scale,
    BLOCK_N: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    """sglang's online-softmax step on one tile of raw scores: (P, rescale, new max, new denominator)."""
    offs_n = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, qk.type.layout))
    if start_n >= full_hi:  # a tile the mask or the key bound cuts: sglang's full select
        qk = qk * sm_scale
        vis = gl.expand_dims(offs_n < len_k, 0)
        if IS_CAUSAL:
            vis = vis & (gl.expand_dims(offs_m + prefix, 1) >= gl.expand_dims(offs_n, 0))
        qk = gl.where(vis, qk, float("-inf"))
    elif INTERIOR == 3:  # an unfusable multiply: the rounding the select forces, without it
        qk = _mul_rn(qk, sm_scale)
    else:  # a select on the bound alone keeps `qk * scale - max` from fusing into one FMA
        qk = gl.where(gl.expand_dims(offs_n < len_k, 0), qk * sm_scale, float("-inf"))
    row_max = gl.max(qk, 1)
    row_max = gl.where(row_max == float("-inf"), -1e20, row_max)
    n_e_max = gl.maximum(row_max, e_max)
    re_scale = _exp(e_max - n_e_max, EXP_FTZ)
    p = _exp(qk - gl.expand_dims(n_e_max, 1), EXP_FTZ)
    deno = deno * re_scale + gl.sum(p, 1)
    return p, re_scale, n_e_max, deno


@gluon.jit
def _item(it, a, IS_CAUSAL: gl.constexpr):
    """Work item `it`: (head, sequence, first row m0, tiles n, len_q, len_k, last key hi). The (sequence, head) pairs
    go in groups of GP (whose K/V fit in L2 together); within a group, block by block, block 0 being each
    sequence's last (it sees the most keys). Blocks end at the sequence's end, so the one cut short is its first
    (m0 < 0: the fewest keys, where idle consumers cost least); n is 0 for a block wholly before the sequence."""
    (LenQ, LenK, HQ, NSEQ, NBLK, GP) = a
    g = it // (GP * NBLK)
    rest = it - g * (GP * NBLK)
    size = gl.minimum(GP, HQ * NSEQ - g * GP)
    blk = rest // size
    pair = g * GP + rest - blk * size
    seq = pair // HQ
    head = pair - seq * HQ
    len_q = gl.load(LenQ + seq)
    len_k = gl.load(LenK + seq)
    m0 = len_q - (blk + 1) * ROWS
    hi = len_k
    if IS_CAUSAL:
        hi = gl.minimum(len_k, len_k - len_q + m0 + ROWS)
    n = gl.where(m0 + ROWS > 0, gl.maximum(hi + BLOCK_N - 1, 0) // BLOCK_N, 0)
    return head, seq, m0, n, len_q, len_k, hi


@gluon.jit
def _post(ring, item_ready, item_free, k, it):
    """Producer: hand item `it` to the consumers through ring slot k % 2."""
    mbarrier.wait(item_free.index(k % 2), ((k // 2) & 1) ^ 1)
    ring.index(k % 2).store(gl.full([1], it, gl.int32, gl.BlockedLayout([1], [32], [4], [0])))
    mbarrier.arrive(item_ready.index(k % 2), count=1)


@gluon.jit
def _take(ring, item_ready, item_free, k):
    """Consumer: the item in ring slot k % 2."""
    mbarrier.wait(item_ready.index(k % 2), (k // 2) & 1)
    it = gl.max(ring.index(k % 2).load(gl.BlockedLayout([1], [32], [4], [0])), 0)
    mbarrier.arrive(item_free.index(k % 2), count=1)
    return it


@gluon.jit
def _consume(
    p,
    WG: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    """Consumer warpgroup WG: rows m0 + WG * 64 .. + 64 of each of the program's items."""
    (
        a,
        Q,
        K,
        V,
        O,
        LSE,
        Row,
        QStart,
        KStart,
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
        total,
        q_smem,
        k_smem,
        v_smem,
        q_bars,
        q_empty,
        k_ready,
        v_ready,
        kv_empty,
        Counter,
        ring,
        item_ready,
        item_free,
    ) = p
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    rows_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    acc_rows: gl.constexpr = gl.SliceLayout(1, acc_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)

    t = 0  # K/V tiles taken so far: the ring position, the same count in every partition
    live = 0  # items with work so far: which Q buffer
    k = 0  # items taken so far
    it = _take(ring, item_ready, item_free, k)
    while it < total:
        head, seq, m0, n, len_q, len_k, hi = _item(it, a, IS_CAUSAL)
        if n > 0:
            prefix = len_k - len_q
            mr = m0 + WG * BLOCK_M
            # tiles below full_hi are seen whole by every row of this warpgroup; it computes n_own of the item's n
            # tiles, the rest lie past its causal edge (one tile will do for rows before the sequence: none is kept)
            full_hi = hi // BLOCK_N * BLOCK_N
            n_own = n
            if IS_CAUSAL:
                full_hi = gl.minimum(full_hi, (prefix + mr + 1) // BLOCK_N * BLOCK_N)
                n_own = (gl.minimum(len_k, prefix + mr + BLOCK_M) + BLOCK_N - 1) // BLOCK_N
            n_own = gl.where(mr + BLOCK_M > 0, gl.maximum(gl.minimum(n_own, n), 1), 1)
            if INTERIOR == 0:
                full_hi = 0

            offs_m = mr + gl.arange(0, BLOCK_M, layout=rows_layout)
            acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout)
            deno = gl.zeros([BLOCK_M], gl.float32, rows_layout)
            e_max = gl.zeros([BLOCK_M], gl.float32, rows_layout) - float("inf")
            qi = (live % 2) * CONSUMERS + WG
            mbarrier.wait(q_bars.index(qi), (live // 2) & 1)
            q = q_smem.index(qi)

            # tile 0: S alone
            mbarrier.wait(k_ready.index(t % STAGES), (t // STAGES) & 1)
            qk = warpgroup_mma(q, k_smem.index(t % STAGES).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
            pr, re_scale, e_max, deno = _softmax(
                qk, e_max, deno, 0, full_hi, offs_m, prefix, len_k, sm_scale, BLOCK_N, IS_CAUSAL, INTERIOR, EXP_FTZ
            )
            acc = acc * gl.expand_dims(gl.convert_layout(re_scale, acc_rows), 1)

            for j in range(1, n_own):
                slot = (t + j) % STAGES
                prev = (t + j - 1) % STAGES
                # issue S_j and acc += P_j-1 V_j-1 (onto the rescaled acc) back to back
                mbarrier.wait(k_ready.index(slot), ((t + j) // STAGES) & 1)
                sj = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                p16 = gl.convert_layout(pr.to(dtype), op_layout)
                mbarrier.wait(v_ready.index(prev), ((t + j - 1) // STAGES) & 1)
                acc = warpgroup_mma(p16, v_smem.index(prev), acc, is_async=True)
                # softmax(S_j), then the wait for P_j-1 V_j-1 (which ptxas hoists above the softmax)
                sj = warpgroup_mma_wait(num_outstanding=1, deps=(sj,))
                pr, re_scale, e_max, deno = _softmax(
                    sj,
                    e_max,
                    deno,
                    j * BLOCK_N,
                    full_hi,
                    offs_m,
                    prefix,
                    len_k,
                    sm_scale,
                    BLOCK_N,
                    IS_CAUSAL,
                    INTERIOR,
                    EXP_FTZ,
                )
                acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p16))
                mbarrier.arrive(kv_empty.index(prev), count=1)  # done with K_j-1 and V_j-1
                acc = acc * gl.expand_dims(gl.convert_layout(re_scale, acc_rows), 1)

            last = (t + n_own - 1) % STAGES
            p16 = gl.convert_layout(pr.to(dtype), op_layout)
            mbarrier.wait(v_ready.index(last), ((t + n_own - 1) // STAGES) & 1)
            acc = warpgroup_mma(p16, v_smem.index(last), acc, is_async=True)
            acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p16))
            mbarrier.arrive(kv_empty.index(last), count=1)
            # tiles past this warpgroup's causal edge: release each once its copy landed (so that an arrival always
            # counts towards the phase the producer waits on)
            for j in range(n_own, n):
                mbarrier.wait(v_ready.index((t + j) % STAGES), ((t + j) // STAGES) & 1)
                mbarrier.arrive(kv_empty.index((t + j) % STAGES), count=1)
            # every copy of this item has landed and its Q is no longer read: the producer may reuse both
            mbarrier.arrive(q_empty.index(qi), count=1)

            row = gl.load(Row + seq).to(gl.int64)
            q_start = gl.load(QStart + seq).to(gl.int64)
            gl.store(LSE + head * lse_sh + row * lse_sb + q_start + offs_m, e_max + gl.log(deno), mask=offs_m >= 0)
            o = acc / gl.expand_dims(gl.convert_layout(deno, acc_rows), 1) * v_scale
            offs_om = mr + gl.arange(0, BLOCK_M, layout=acc_rows)
            offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
            # rows in int64 (q_start is): a long sequence's row x stride can pass 2^31
            o_ptrs = O + row * sob + head * soh + gl.expand_dims(q_start + offs_om, 1) * sos + gl.expand_dims(offs_d, 0)
            gl.store(o_ptrs, o.to(dtype), mask=gl.expand_dims(offs_om >= 0, 1))
            t += n
            live += 1
        k += 1
        it = _take(ring, item_ready, item_free, k)


@gluon.jit
def _produce_item(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    k_smem,
    v_smem,
    q_bars,
    k_ready,
    v_ready,
    kv_empty,
    qb,
    m0,
    n,
    t,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
):
    """One item's copies: the consumers' Q tiles into buffer qb, then K_j and V_j into ring slots once freed."""
    for c in gl.static_range(CONSUMERS):
        # a tile wholly before the sequence: no copy, a plain arrival keeps the barrier's phases in step (a tile
        # that starts before it loads from a negative row: TMA fills the rows out of bounds with zeros)
        rows = m0 + (c + 1) * BLOCK_M > 0
        bar = q_bars.index(qb * CONSUMERS + c)
        _load(q_desc, q_smem.index(qb * CONSUMERS + c), bar, m0 + c * BLOCK_M, BLOCK_M, HEAD_DIM, pred=rows)
        mbarrier.arrive(bar, count=1, pred=m0 + (c + 1) * BLOCK_M <= 0)
    for j in range(n):
        slot = (t + j) % STAGES
        # a fresh mbarrier counts as having completed the phase before 0: the first STAGES waits pass at once
        mbarrier.wait(kv_empty.index(slot), (((t + j) // STAGES) & 1) ^ 1)
        _load(k_desc, k_smem.index(slot), k_ready.index(slot), j * BLOCK_N, BLOCK_N, HEAD_DIM)
        _load(v_desc, v_smem.index(slot), v_ready.index(slot), j * BLOCK_N, BLOCK_N, HEAD_DIM)
    return t + n


# The partitions; the workers' signatures must match.
@gluon.jit
def _consumer0(
    p,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    _consume(p, 0, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)


@gluon.jit
def _consumer1(
    p,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    _consume(p, 1, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)


@gluon.jit
def _consumer2(
    p,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    _consume(p, 2, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)


@gluon.jit
def _producer(
    p,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    """Per item: wait until its Q buffer's previous item is fully done, build its descriptors, issue its copies."""
    (
        a,
        Q,
        K,
        V,
        O,
        LSE,
        Row,
        QStart,
        KStart,
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
        total,
        q_smem,
        k_smem,
        v_smem,
        q_bars,
        q_empty,
        k_ready,
        v_ready,
        kv_empty,
        Counter,
        ring,
        item_ready,
        item_free,
    ) = p
    t = 0
    live = 0
    k = 0
    it = gl.atomic_add(Counter, 1)
    _post(ring, item_ready, item_free, k, it)
    while it < total:
        head, seq, m0, n, len_q, len_k, hi = _item(it, a, IS_CAUSAL)
        if n > 0:
            qb = live % 2
            for c in gl.static_range(CONSUMERS):
                mbarrier.wait(q_empty.index(qb * CONSUMERS + c), ((live // 2) & 1) ^ 1)
            # item live-2 used this buffer's descriptors too: all its copies have landed (q_empty), so two sets of
            # descriptors taken in turn are never rewritten under a copy. The two branches below are the two sets:
            # each builds its own (6 tensormap sites, 768 bytes of scratch under triton 3.6). Do not merge them: a
            # helper that only returns descriptors from the branches gets folded into one set (3 sites).
            row = gl.load(Row + seq).to(gl.int64)
            q_base = Q + row * sqb + head * sqh + gl.load(QStart + seq).to(gl.int64) * sqs
            k_start = gl.load(KStart + seq).to(gl.int64)
            k_base = K + row * skb + (head // group) * skh + k_start * sks
            v_base = V + row * svb + (head // group) * svh + k_start * svs
            # bounded by the sequence: rows past its end arrive as zeros
            if qb == 0:
                t = _produce_item(
                    tma.make_tensor_descriptor(
                        q_base,
                        shape=[len_q, HEAD_DIM],
                        strides=[sqs, 1],
                        block_shape=[BLOCK_M, HEAD_DIM],
                        layout=q_smem.layout,
                    ),
                    tma.make_tensor_descriptor(
                        k_base,
                        shape=[len_k, HEAD_DIM],
                        strides=[sks, 1],
                        block_shape=[BLOCK_N, HEAD_DIM],
                        layout=k_smem.layout,
                    ),
                    tma.make_tensor_descriptor(
                        v_base,
                        shape=[len_k, HEAD_DIM],
                        strides=[svs, 1],
                        block_shape=[BLOCK_N, HEAD_DIM],
                        layout=v_smem.layout,
                    ),
                    q_smem,
                    k_smem,
                    v_smem,
                    q_bars,
                    k_ready,
                    v_ready,
                    kv_empty,
                    qb,
                    m0,
                    n,
                    t,
                    HEAD_DIM,
                    STAGES,
                )
            else:
                t = _produce_item(
                    tma.make_tensor_descriptor(
                        q_base,
                        shape=[len_q, HEAD_DIM],
                        strides=[sqs, 1],
                        block_shape=[BLOCK_M, HEAD_DIM],
                        layout=q_smem.layout,
                    ),
                    tma.make_tensor_descriptor(
                        k_base,
                        shape=[len_k, HEAD_DIM],
                        strides=[sks, 1],
                        block_shape=[BLOCK_N, HEAD_DIM],
                        layout=k_smem.layout,
                    ),
                    tma.make_tensor_descriptor(
                        v_base,
                        shape=[len_k, HEAD_DIM],
                        strides=[svs, 1],
                        block_shape=[BLOCK_N, HEAD_DIM],
                        layout=v_smem.layout,
                    ),
                    q_smem,
                    k_smem,
                    v_smem,
                    q_bars,
                    k_ready,
                    v_ready,
                    kv_empty,
                    qb,
                    m0,
                    n,
                    t,
                    HEAD_DIM,
                    STAGES,
                )
            live += 1
        k += 1
        it = gl.atomic_add(Counter, 1)
        _post(ring, item_ready, item_free, k, it)
    # every program's last take fails exactly once (it >= total), so the last failing take of all is the counter's
    # last use in this launch: it leaves the counter at 0 for the next launch on the stream (no zero-fill launch)
    if it == total + gl.num_programs(0) - 1:
        gl.atomic_xchg(Counter, 0)


@gluon.jit
def attn_fwd_ws_sm90_kernel(
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
    n_heads,
    n_seq,
    n_blocks,
    group_pairs,
    total,
    Counter,
    HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr,
    IS_CAUSAL: gl.constexpr,
    INTERIOR: gl.constexpr,
    EXP_FTZ: gl.constexpr,
):
    # grid: one program per multiprocessor (or per item, if fewer); each takes its next item from Counter
    dtype: gl.constexpr = Q.dtype.element_ty
    q_smem = gl.allocate_shared_memory(
        dtype, [2 * CONSUMERS, BLOCK_M, HEAD_DIM], gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    )
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    # Q buffers: two sets (this item's, the next one's), one tile per consumer; K/V: a ring of STAGES slots
    q_bars = gl.allocate_shared_memory(gl.int64, [2 * CONSUMERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2 * CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * CONSUMERS):
        mbarrier.init(q_bars.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=CONSUMERS)  # every consumer releases a slot

    ring = gl.allocate_shared_memory(gl.int32, [2, 1], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    item_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    item_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(item_ready.index(i), count=1)
        mbarrier.init(item_free.index(i), count=CONSUMERS)
    p = (
        (LenQ, LenK, n_heads, n_seq, n_blocks, group_pairs),
        Q,
        K,
        V,
        O,
        LSE,
        Row,
        QStart,
        KStart,
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
        total,
        q_smem,
        k_smem,
        v_smem,
        q_bars,
        q_empty,
        k_ready,
        v_ready,
        kv_empty,
        Counter,
        ring,
        item_ready,
        item_free,
    )
    # The producer is a whole warpgroup because setmaxnreg counts registers per warpgroup: with 4 of them at
    # maxnreg=128 the file is full, and Triton gives the default partition (consumer 0) what the workers leave:
    # 4 * 128 - 2 * 160 - 24 = 168. Asking for more than the file holds would stall setmaxnreg forever.
    gl.warp_specialize(
        [
            (_consumer0, (p, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)),
            (_consumer1, (p, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)),
            (_consumer2, (p, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)),
            (_producer, (p, HEAD_DIM, STAGES, IS_CAUSAL, INTERIOR, EXP_FTZ)),
        ],
        [4, 4, 4],
        [160, 160, 24],
    )
