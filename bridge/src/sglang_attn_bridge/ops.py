"""Launchers for the Triton kernels (and the Gluon forward and dK/dV on Hopper) on [B, S, H, D] `Varlen` views.

Tensors stay in the strided views transformers hands us (only the last dim must be contiguous), so a plain, padded or
packed batch needs no gather/scatter copies. Which kernels run, and their tiles, come from `kernel_plan.plan`.
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import torch
import triton

from . import config, kernel_plan
from .kernel_plan import attn_fwd_ws_sm90_kernel, dkdv_sm90_kernel, dq_sm90_kernel
from .kernels.backward import delta_kernel, dkdv_kernel, dq_kernel
from .kernels.forward import attn_fwd_kernel
from .launch import launch
from .layout import Varlen


def _cdiv(a: int, b: int) -> int:
    # plain integer helpers: triton.cdiv and next_power_of_2 are constexpr functions in Triton 3.6, whose calls from
    # host code cost several microseconds each (a per-call import and argument unwrapping)
    return -(-a // b)


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _prec(dtype: torch.dtype) -> str:
    # fp32 inputs get true fp32 products; half types are exact in any mode
    return "ieee" if dtype == torch.float32 else "tf32"


def _lay_args(lay: Varlen):
    return lay.row, lay.q_start, lay.k_start, lay.len_q, lay.len_k


def _window(window) -> int:
    return -1 if window is None else int(window)


def _sig(t: torch.Tensor) -> tuple:
    """What a launch specializes on for a tensor argument, with its shape and strides (they fix the int arguments)."""
    return t.shape, t.stride(), t.dtype, t.data_ptr() % 16 == 0


def l2_group_pairs(pairs: int, max_k: int, head_dim: int, elem_bytes: int, group: int, mb: int) -> int:
    """How many (sequence, head) pairs the Gluon forward works on together: as many as keep their K and V within `mb`
    MB of L2 (a query head's share of its KV head's keys and values: its GQA group shares them), at least one;
    mb = 0: all of them."""
    if not mb:
        return pairs
    per_pair = max_k * head_dim * 2 * elem_bytes / group
    return max(1, min(pairs, int(mb * 2**20 // per_pair)))


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _max_regs(n: int) -> dict:
    """Launch option capping registers per thread (Triton's maxnreg); none when 0."""
    return {"maxnreg": n} if n else {}


def _ensure_allocator(dev: torch.device, *launches: kernel_plan.Launch) -> None:
    """Device-built TMA descriptors need a little scratch memory through `triton.set_allocator`: where a launch on a
    GPU builds them, install torch's allocator unless the caller set one (the setting is per thread: autograd runs
    the backward in its own). The plan only asks for TMA where this Triton has the hook."""
    if dev.type != "cuda" or not any(launch.tma for launch in launches):
        return
    from triton.runtime import _allocation

    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(functools.partial(_scratch, dev))


_scratch_buffers: dict = {}


def _scratch(dev: torch.device, size: int, alignment: int, stream) -> torch.Tensor:
    """Scratch for a launch's device-built TMA descriptors, kept per (device, stream, size): launches on one stream
    run one after another, so the next one may rewrite it (one allocation less per launch). A graph being captured
    gets its own (its replays may run on any stream)."""
    if torch.cuda.is_current_stream_capturing():
        return torch.empty(size, dtype=torch.int8, device=dev)
    key = (dev, stream, size)
    buf = _scratch_buffers.get(key)
    if buf is None:
        buf = _scratch_buffers[key] = torch.empty(size, dtype=torch.int8, device=dev)
    return buf


@functools.cache
def _side_stream(device: torch.device) -> torch.cuda.Stream:
    return torch.cuda.Stream(device)


@functools.cache
def _fork_join(device: torch.device, stream: int, thread: int) -> tuple:
    """Two events kept for one (device, stream, thread): recording an event again is safe once the waits queued on
    its earlier record are queued (a wait takes the event's state when it is queued), and one thread queues them in
    order; creating a pair per call was four more driver calls."""
    return torch.cuda.Event(), torch.cuda.Event()


def _side_by_side(first, second, device: torch.device) -> None:
    """Launch `first` on the current stream and `second` on a second one, both after the work already queued, and
    make the current stream wait for both: the second kernel's programs fill the SMs that the first one's last wave
    leaves idle. Each launch allocates only on its own stream, and the caller's stream waits for the second before
    anything it queues later can reuse memory, so no tensor needs record_stream."""
    main = torch.cuda.current_stream(device)
    side = _side_stream(device)
    fork, join = _fork_join(device, main.cuda_stream, threading.get_ident())
    fork.record(main)
    side.wait_event(fork)
    first()
    with torch.cuda.stream(side):
        second()
    join.record(side)
    main.wait_event(join)


_counters: dict = {}


def _work_counter(device: torch.device) -> torch.Tensor:
    """The Gluon forward's item counter: zero before a launch, and the kernel leaves it at zero (its last take
    resets it), so one counter per (device, stream) serves every launch on that stream without a zero-fill launch.
    Launches on one stream run one after another; a graph being captured gets a counter of its own (its replays may
    run on any stream)."""
    if device.type != "cuda" or torch.cuda.is_current_stream_capturing():
        return torch.zeros(1, dtype=torch.int32, device=device)
    key = (device, torch._C._cuda_getCurrentRawStream(device.index))
    counter = _counters.get(key)
    if counter is None:
        counter = _counters[key] = torch.zeros(1, dtype=torch.int32, device=device)
    return counter


def lse_dtype(q: torch.Tensor) -> torch.dtype:
    """The LSE (and Delta) arrays' dtype: fp64 where the kernels run PRECISE (fp32 inputs on a GPU: see
    kernels/forward.py), else fp32."""
    if q.dtype == torch.float32 and not kernel_plan.Target.of(q.device).interpreting:
        return torch.float64
    return torch.float32


def forward_kernel(q, k, v, window=None, softcap=0.0) -> str:
    """Which in-tree forward a call that wants the output runs: "gluon" (Hopper) or "triton"."""
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    return kernel_plan.plan(q, k, v, window, softcap).forward.kernel


def forward(q, k, v, lay: Varlen, scale: float, causal: bool, window=None, softcap=0.0, compute_o=True, gluon=True):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] views -> (o [B, Sq, Hq, D] contiguous or None, lse [Hq, B*Sq], its
    dtype lse_dtype(q)).

    `window` is in sglang's convention (query i sees key j iff i - j <= window), None for none. gluon=False keeps
    the Triton forward where the Gluon one would run (the probe checks each).
    """
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    if gluon:
        plan = kernel_plan.plan(q, k, v, window, softcap, compute_o)
    else:
        target = dataclasses.replace(kernel_plan.Target.of(q.device), gluon="the caller asked for the Triton forward")
        plan = kernel_plan.plan(q, k, v, window, softcap, compute_o, target=target)
    fwd = plan.forward
    _ensure_allocator(q.device, fwd)
    sig = (id(plan), _sig(q), _sig(k), _sig(v), lay.signature, bool(causal), window, float(softcap or 0.0))
    lse = torch.empty((Hq, B * Sq), device=q.device, dtype=torch.float64 if plan.precise else torch.float32)
    o = None
    if compute_o:
        o = (torch.empty if lay.covers_all else torch.zeros)((B, Sq, Hq, D), device=q.device, dtype=q.dtype)
    o_arg = o if o is not None else q
    q_st, k_st, v_st, o_arg_st, lse_st = q.stride(), k.stride(), v.stride(), o_arg.stride(), lse.stride()
    strides = (
        q_st[0],
        q_st[1],
        q_st[2],
        k_st[0],
        k_st[1],
        k_st[2],
        v_st[0],
        v_st[1],
        v_st[2],
        o_arg_st[0],
        o_arg_st[1],
        o_arg_st[2],
    )
    if fwd.kernel == "gluon":
        nblk = _cdiv(lay.max_q, fwd.rows)
        pairs = Hq * lay.n
        items = pairs * nblk
        group_pairs = l2_group_pairs(pairs, lay.max_k, D, q.element_size(), Hq // Hkv, plan.l2_group_mb)
        counter = _work_counter(q.device)  # the next item to take
        # persistent: one program per multiprocessor; 4 warpgroups at maxnreg=128 fill the register file, which the
        # kernel splits between them (setmaxnreg)
        launch(
            attn_fwd_ws_sm90_kernel,
            (min(items, _sm_count(q.device)),),
            (
                q,
                k,
                v,
                o,
                lse,
                *_lay_args(lay),
                float(scale),
                1.0,
                *strides,
                lse_st[0],
                Sq,
                Hq // Hkv,
                Hq,
                lay.n,
                nblk,
                group_pairs,
                items,
                counter,
            ),
            dict(
                HEAD_DIM=D,
                STAGES=fwd.stages,
                IS_CAUSAL=bool(causal),
                INTERIOR=plan.interior,
                EXP_FTZ=plan.exp_ftz,
                num_warps=fwd.warps,
                maxnreg=fwd.max_regs,
            ),
            sig,
        )
        return o, lse
    grid = (Hq, lay.n, _cdiv(lay.max_q, fwd.rows))
    launch(
        attn_fwd_kernel,
        grid,
        (
            q,
            k,
            v,
            o_arg,
            lse,
            *_lay_args(lay),
            float(scale),
            1.0,
            *strides,
            lse_st[0],
            Sq,
            Hq // Hkv,
        ),
        dict(
            HEAD_DIM=D,
            BLOCK_D=max(16, _pow2(D)),
            BLOCK_M=fwd.rows,
            BLOCK_N=fwd.keys,
            IS_CAUSAL=bool(causal),
            WINDOW=_window(window),
            SOFTCAP=float(softcap or 0.0),
            COMPUTE_O=bool(compute_o),
            INTERIOR=plan.interior,
            DOT_PREC=_prec(q.dtype),
            TMA=fwd.tma,
            FAST=plan.fast,
            EXP_FTZ=plan.exp_ftz,
            PRECISE=plan.precise,
            num_warps=fwd.warps,
            num_stages=fwd.stages,
            **_max_regs(fwd.max_regs),
        ),
        sig,
    )
    return o, lse


def backward(
    do, q, k, v, o, lse, lay: Varlen, scale: float, causal: bool, window=None, softcap=0.0, parts=("dkdv", "dq")
):
    """Gradients shaped [B, S, H, D] with the strides of q/k/v (so autograd hands them on without a layout copy),
    each written by exactly one program. `parts` lets the bench time the dK/dV and dQ kernels apart."""
    do, q, k, v, o = (_last_dim_contiguous(t) for t in (do, q, k, v, o))
    alloc = torch.empty_like if lay.covers_all else torch.zeros_like
    dq, dk, dv = alloc(q), alloc(k), alloc(v)
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    whole_rows = lay.covers_all and lay.n == B and lay.max_q == Sq
    scores = Hq * lay.n * lay.max_q * lay.max_k  # at most this many attention scores: how long the call runs
    long_call = scores >= config.bwd_config(D).overlap_min_scores
    plan = kernel_plan.plan(q, k, v, window, softcap, do=do, whole_rows=whole_rows, long_call=long_call)
    if (
        "dkdv" in parts
        and plan.dkdv.kernel != "gluon"
        and q.stride(2) != D
        and not kernel_plan.Target.of(q.device).gluon
    ):
        # a packed [1, H, T, D] q (transformers' layout) that the Gluon dK/dV kernel cannot read in place (a whole-row
        # [B, H, S, D] q it reads as row blocks: kernel_plan.q_head_rows): one copy with a token's heads side by side
        # lets it run (its TMA view spans a GQA group's heads), which saves far more than the copy costs
        qc = q.contiguous()
        with_copy = kernel_plan.plan(qc, k, v, window, softcap, do=do, whole_rows=whole_rows, long_call=long_call)
        if with_copy.dkdv.kernel == "gluon":
            q, plan = qc, with_copy
    q_hrow = kernel_plan.q_head_rows(q, whole_rows, plan.dkdv.rows) if plan.dkdv.kernel == "gluon" else 0
    _ensure_allocator(q.device, plan.dkdv, plan.dq)
    q_st, k_st, v_st, o_st, do_st, lse_st = q.stride(), k.stride(), v.stride(), o.stride(), do.stride(), lse.stride()
    dq_st, dk_st, dv_st = dq.stride(), dk.stride(), dv.stride()
    block_d = max(16, _pow2(D))
    delta = torch.empty_like(lse)
    common = dict(
        IS_CAUSAL=bool(causal),
        WINDOW=_window(window),
        SOFTCAP=float(softcap or 0.0),
        DOT_PREC=_prec(q.dtype),
        PRECISE=plan.precise,
    )
    sig = (
        id(plan),
        _sig(do),
        _sig(q),
        _sig(k),
        _sig(v),
        _sig(o),
        _sig(lse),
        _sig(dq),
        _sig(dk),
        _sig(dv),
        lay.signature,
        bool(causal),
        window,
        float(softcap or 0.0),
    )

    launch(
        delta_kernel,
        (_cdiv(lay.max_q, 64), Hq, lay.n),
        (
            o,
            do,
            delta,
            lay.row,
            lay.q_start,
            lay.len_q,
            o_st[0],
            o_st[1],
            o_st[2],
            do_st[0],
            do_st[1],
            do_st[2],
            lse_st[0],
            Sq,
        ),
        dict(
            HEAD_DIM=D,
            BLOCK_D=block_d,
            BLOCK_M=64,
        ),
        sig,
    )

    def dkdv():
        lp = plan.dkdv
        if lp.kernel == "gluon":
            blocks = _cdiv(lay.max_k, lp.keys)
            grid = (_cdiv(blocks, 2), Hkv, lay.n) if plan.pairs else (Hkv, lay.n, blocks)
            launch(
                dkdv_sm90_kernel,
                grid,
                (
                    q,
                    k,
                    v,
                    do,
                    dk,
                    dv,
                    lse,
                    delta,
                    *_lay_args(lay),
                    float(scale),
                    q_st[0],
                    q_st[1],
                    k_st[0],
                    k_st[1],
                    k_st[2],
                    v_st[0],
                    v_st[1],
                    v_st[2],
                    do_st[0],
                    do_st[1],
                    dk_st[0],
                    dk_st[1],
                    dk_st[2],
                    dv_st[0],
                    dv_st[1],
                    dv_st[2],
                    lse_st[0],
                    Sq,
                    Hq // Hkv,
                    q_hrow,
                ),
                dict(
                    HEAD_DIM=D,
                    BLOCK_M=lp.rows,
                    BLOCK_N=lp.keys,
                    IS_CAUSAL=bool(causal),
                    PAIRS=plan.pairs,
                    num_warps=lp.warps,
                ),
                sig,
            )
            return
        launch(
            dkdv_kernel,
            (Hkv, lay.n, _cdiv(lay.max_k, lp.keys)),
            (
                q,
                k,
                v,
                do,
                dk,
                dv,
                lse,
                delta,
                *_lay_args(lay),
                float(scale),
                q_st[0],
                q_st[1],
                q_st[2],
                k_st[0],
                k_st[1],
                k_st[2],
                v_st[0],
                v_st[1],
                v_st[2],
                do_st[0],
                do_st[1],
                do_st[2],
                dk_st[0],
                dk_st[1],
                dk_st[2],
                dv_st[0],
                dv_st[1],
                dv_st[2],
                lse_st[0],
                Sq,
                Hq // Hkv,
            ),
            dict(
                HEAD_DIM=D,
                BLOCK_D=block_d,
                BLOCK_M=lp.rows,
                BLOCK_N=lp.keys,
                **common,
                TMA=lp.tma,
                num_warps=lp.warps,
                num_stages=lp.stages,
                **_max_regs(lp.max_regs),
            ),
            sig,
        )

    def dq_():
        lp = plan.dq
        # the Gluon and Triton dQ kernels take the same runtime arguments
        args = (
            q,
            k,
            v,
            do,
            dq,
            lse,
            delta,
            *_lay_args(lay),
            float(scale),
            *q_st[:3],
            *k_st[:3],
            *v_st[:3],
            *do_st[:3],
            *dq_st[:3],
            lse_st[0],
            Sq,
            Hq // Hkv,
        )
        if lp.kernel == "gluon":
            blocks = _cdiv(lay.max_q, lp.rows)
            grid = (_cdiv(blocks, 2), Hq, lay.n) if plan.dq_pairs else (Hq, lay.n, blocks)
            kw = dict(IS_CAUSAL=bool(causal), PAIRS=plan.dq_pairs, DEFER=plan.dq_defer)
            launch(
                dq_sm90_kernel,
                grid,
                args,
                dict(HEAD_DIM=D, BLOCK_M=lp.rows, BLOCK_N=lp.keys, **kw, num_warps=lp.warps),
                sig,
            )
            return
        launch(
            dq_kernel,
            (Hq, lay.n, _cdiv(lay.max_q, lp.rows)),
            args,
            dict(
                HEAD_DIM=D,
                BLOCK_D=block_d,
                BLOCK_M=lp.rows,
                BLOCK_N=lp.keys,
                **common,
                TMA=lp.tma,
                num_warps=lp.warps,
                num_stages=lp.stages,
                **_max_regs(lp.max_regs),
            ),
            sig,
        )

    if "dkdv" in parts and "dq" in parts and plan.streams == 2:
        _side_by_side(dkdv, dq_, q.device)
    else:
        for name, run in (("dkdv", dkdv), ("dq", dq_)):
            if name in parts:
                run()
    return dq, dk, dv


# bench/check_h200.py labels its GPU cases with these three questions; the launchers above read the plan itself.
# `cfg` is the head dim's current config there, which is what the plan reads.
def _use_tma(wanted: bool, *tensors: torch.Tensor) -> bool:
    return wanted and kernel_plan.Target.of(tensors[0].device).tma and all(map(kernel_plan.tma_aligned, tensors))


def _use_gluon_fwd(cfg, q, k, v, window, softcap, compute_o) -> bool:
    return kernel_plan.plan(q, k, v, window, softcap, compute_o).forward.kernel == "gluon"


def _use_gluon_dkdv(cfg, q, k, v, do, window, softcap) -> bool:
    return kernel_plan.plan(q, k, v, window, softcap, do=do).dkdv.kernel == "gluon"
