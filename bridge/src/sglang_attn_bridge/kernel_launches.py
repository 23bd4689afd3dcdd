"""Launchers for the Triton kernels (and the Gluon forward and dK/dV on Hopper) on [B, S, H, D] `Varlen` views.

Tensors stay in the strided views transformers hands us (only the last dim must be contiguous), so a plain, padded or
packed batch needs no gather/scatter copies. Which kernels run, and their tiles, come from `kernel_plan.plan`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading

import torch
import triton

from . import config, kernel_plan
from .kernel_plan import attn_fwd_ws_sm90_kernel, dkdv_sm90_kernel, dq_sm90_kernel, tensor_key
from .kernels.backward import delta_kernel, dkdv_kernel, dq_kernel
from .kernels.forward import attn_fwd_kernel
from .launch import clear as launch_cache_clear
from .launch import launch
from .layout import Varlen
from .scoring import Scoring


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


def _ensure_allocator(dev: torch.device) -> None:
    """Device-built TMA descriptors need a little scratch memory through `triton.set_allocator`: for a launch on a
    GPU that builds them, install torch's allocator unless the caller set one (the setting is per thread: autograd
    runs the backward in its own). The plan only asks for TMA where this Triton has the hook."""
    if dev.type != "cuda":
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


@dataclasses.dataclass(frozen=True)
class _Step:
    """One kernel launch of a recipe: which kernel (Gluon or Triton), its grid, its integer arguments after the
    tensors and scalars (strides and sizes), its constexprs and options, and its key for `launch`."""

    gluon: bool
    grid: tuple
    ints: tuple
    kwargs: dict
    sig: tuple


@dataclasses.dataclass(frozen=True)
class _FwdRecipe:
    step: _Step
    lse_shape: tuple
    lse_dtype: torch.dtype
    o_shape: tuple | None  # None: the LSE-only forward
    tma: bool
    keep: tuple  # the plan and configs, alive while the recipe is (their ids are in its key)


@dataclasses.dataclass(frozen=True)
class _BwdRecipe:
    copy_q: bool
    delta: _Step
    dkdv: _Step | None
    dq: _Step | None
    streams: int
    tma: bool
    keep: tuple


# A call's launches are worked out once per recipe key: the shapes, strides, dtypes and alignment of its tensors,
# its layout's signature, its flags and the plan's inputs (target, config tables). A later call with the same key
# only allocates its outputs and launches: at short lengths a call is bound by the CPU, and the plan, the grids,
# the argument lists and the launch keys were most of its Python.
_recipes: dict = {}
_serial = itertools.count()


def call_key(kind: str, q: torch.Tensor, rest: tuple) -> tuple:
    """(key, configs): `rest` with what a plan for q's device depends on besides the tensors (the target, the head
    dim's config tables); hold the configs while the key is in use (their ids are in it)."""
    target = kernel_plan.Target.of(q.device)
    d = q.shape[-1]
    cfgs = (config.fwd_config(d, target.interpreting), config.bwd_config(d, target.interpreting))
    return (kind, id(target), id(cfgs[0]), id(cfgs[1]), *rest), cfgs


def _keep(key: tuple, recipe):
    if len(_recipes) > 4096:
        _recipes.clear()
        launch_cache_clear()
    _recipes[key] = recipe
    return recipe


def _step(gluon: bool, grid: tuple, ints: tuple, kwargs: dict, part: str) -> _Step:
    return _Step(gluon, grid, tuple(ints), kwargs, (part, next(_serial)))


def forward(q, k, v, lay: Varlen, scoring: Scoring, compute_o=True, gluon=True):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] views -> (o [B, Sq, Hq, D] contiguous or None, lse [Hq, B*Sq], its
    dtype lse_dtype(q)).

    gluon=False keeps the Triton forward where the Gluon one would run (the probe checks each).
    """
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    flags = (lay.signature, scoring.causal, scoring.window, scoring.softcap, bool(compute_o), bool(gluon))
    key, cfgs = call_key("fwd", q, (*map(tensor_key, (q, k, v)), *flags))
    r = _recipes.get(key)
    if r is None:
        r = _keep(key, _forward_recipe(q, k, v, lay, scoring, compute_o, gluon, cfgs))
    dev = q.device
    if r.tma:
        _ensure_allocator(dev)
    lse = torch.empty(r.lse_shape, device=dev, dtype=r.lse_dtype)
    o = None
    if r.o_shape is not None:
        o = (torch.empty if lay.covers_all else torch.zeros)(r.o_shape, device=dev, dtype=q.dtype)
    st = r.step
    head = (q, k, v, q if o is None else o, lse, *_lay_args(lay), scoring.scale, 1.0)
    if st.gluon:
        launch(attn_fwd_ws_sm90_kernel, st.grid, (*head, *st.ints, _work_counter(dev)), st.kwargs, st.sig)
    else:
        launch(attn_fwd_kernel, st.grid, (*head, *st.ints), st.kwargs, st.sig)
    return o, lse


def _forward_recipe(q, k, v, lay: Varlen, scoring: Scoring, compute_o, gluon, cfgs) -> _FwdRecipe:
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    causal, window, softcap = scoring.causal, scoring.window, scoring.softcap
    if gluon:
        plan = kernel_plan.plan(q, k, v, window, softcap, compute_o)
    else:
        target = dataclasses.replace(kernel_plan.Target.of(q.device), gluon="the caller asked for the Triton forward")
        plan = kernel_plan.plan(q, k, v, window, softcap, compute_o, target=target)
    fwd = plan.forward
    lse_shape, o_shape = (Hq, B * Sq), (B, Sq, Hq, D) if compute_o else None
    # o is a fresh contiguous [B, Sq, Hq, D] tensor; without it the kernel gets q in its place (and writes nothing)
    o_st = (Sq * Hq * D, Hq * D, D) if compute_o else q.stride()[:3]
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o_st, B * Sq)
    if fwd.kernel == "gluon":
        nblk = _cdiv(lay.max_q, fwd.rows)
        pairs = Hq * lay.n
        items = pairs * nblk
        group_pairs = l2_group_pairs(pairs, lay.max_k, D, q.element_size(), Hq // Hkv, plan.l2_group_mb)
        # persistent: one program per multiprocessor; 4 warpgroups at maxnreg=128 fill the register file, which the
        # kernel splits between them (setmaxnreg); the last argument is the item counter (the next item to take)
        step = _step(
            True,
            (min(items, _sm_count(q.device)),),
            (*strides, Sq, Hq // Hkv, Hq, lay.n, nblk, group_pairs, items),
            dict(
                HEAD_DIM=D,
                STAGES=fwd.stages,
                IS_CAUSAL=bool(causal),
                INTERIOR=plan.interior,
                EXP_FTZ=plan.exp_ftz,
                num_warps=fwd.warps,
                maxnreg=fwd.max_regs,
            ),
            "fwd",
        )
    else:
        step = _step(
            False,
            (Hq, lay.n, _cdiv(lay.max_q, fwd.rows)),
            (*strides, Sq, Hq // Hkv),
            dict(
                HEAD_DIM=D,
                BLOCK_D=max(16, _pow2(D)),
                BLOCK_M=fwd.rows,
                BLOCK_N=fwd.keys,
                IS_CAUSAL=bool(causal),
                WINDOW=_window(window),
                SOFTCAP=softcap,
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
            "fwd",
        )
    lse_dtype = torch.float64 if plan.precise else torch.float32
    return _FwdRecipe(step, lse_shape, lse_dtype, o_shape, fwd.tma, (plan, *cfgs))


def backward(do, q, k, v, o, lse, lay: Varlen, scoring: Scoring, parts=("dkdv", "dq")):
    """Gradients shaped [B, S, H, D] with the strides of q/k/v (so autograd hands them on without a layout copy),
    each written by exactly one program. `parts` lets the bench time the dK/dV and dQ kernels apart."""
    do, q, k, v, o = (_last_dim_contiguous(t) for t in (do, q, k, v, o))
    flags = (lay.signature, scoring.causal, scoring.window, scoring.softcap, tuple(parts))
    key, cfgs = call_key("bwd", q, (*map(tensor_key, (do, q, k, v, o, lse)), *flags))
    alloc = torch.empty_like if lay.covers_all else torch.zeros_like
    dq, dk, dv = alloc(q), alloc(k), alloc(v)
    delta = torch.empty_like(lse)
    r = _recipes.get(key)
    if r is None:
        r = _keep(key, _backward_recipe(do, q, k, v, o, lse, dq, dk, dv, lay, scoring, parts, cfgs))
    if r.copy_q:
        q = q.contiguous()
    if r.tma:
        _ensure_allocator(q.device)
    st = r.delta
    launch(delta_kernel, st.grid, (o, do, delta, lay.row, lay.q_start, lay.len_q, *st.ints), st.kwargs, st.sig)
    head = (*_lay_args(lay), scoring.scale)

    def dkdv():
        st = r.dkdv
        fn = dkdv_sm90_kernel if st.gluon else dkdv_kernel
        launch(fn, st.grid, (q, k, v, do, dk, dv, lse, delta, *head, *st.ints), st.kwargs, st.sig)

    def dq_():
        st = r.dq  # the Gluon and Triton dQ kernels take the same runtime arguments
        fn = dq_sm90_kernel if st.gluon else dq_kernel
        launch(fn, st.grid, (q, k, v, do, dq, lse, delta, *head, *st.ints), st.kwargs, st.sig)

    if r.streams == 2:
        _side_by_side(dkdv, dq_, q.device)
    else:
        if r.dkdv is not None:
            dkdv()
        if r.dq is not None:
            dq_()
    return dq, dk, dv


def _backward_recipe(do, q, k, v, o, lse, dq, dk, dv, lay, scoring: Scoring, parts, cfgs) -> _BwdRecipe:
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    causal, window, softcap = scoring.causal, scoring.window, scoring.softcap
    whole_rows = lay.covers_all and lay.n == B and lay.max_q == Sq
    scores = Hq * lay.n * lay.max_q * lay.max_k  # at most this many attention scores: how long the call runs
    long_call = scores >= cfgs[1].overlap_min_scores
    plan = kernel_plan.plan(q, k, v, window, softcap, do=do, whole_rows=whole_rows, long_call=long_call)
    copy_q = False
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
            q, plan, copy_q = qc, with_copy, True
    q_hrow = kernel_plan.q_head_rows(q, whole_rows, plan.dkdv.rows) if plan.dkdv.kernel == "gluon" else 0
    q_st, k_st, v_st, o_st, do_st = q.stride(), k.stride(), v.stride(), o.stride(), do.stride()
    dq_st, dk_st, dv_st, lse_st = dq.stride(), dk.stride(), dv.stride(), lse.stride()
    block_d = max(16, _pow2(D))
    common = dict(  # the Triton dK/dV and dQ kernels' constexprs besides their tiles
        HEAD_DIM=D,
        BLOCK_D=block_d,
        IS_CAUSAL=bool(causal),
        WINDOW=_window(window),
        SOFTCAP=softcap,
        DOT_PREC=_prec(q.dtype),
        PRECISE=plan.precise,
    )

    def triton(lp: kernel_plan.Launch) -> dict:
        tiles = dict(BLOCK_M=lp.rows, BLOCK_N=lp.keys, TMA=lp.tma, num_warps=lp.warps, num_stages=lp.stages)
        return {**common, **tiles, **_max_regs(lp.max_regs)}

    delta = _step(
        False,
        (_cdiv(lay.max_q, 64), Hq, lay.n),
        (*o_st[:3], *do_st[:3], lse_st[0], Sq),
        dict(HEAD_DIM=D, BLOCK_D=block_d, BLOCK_M=64),
        "delta",
    )
    dkdv = None
    if "dkdv" in parts:
        lp = plan.dkdv
        if lp.kernel == "gluon":
            blocks = _cdiv(lay.max_k, lp.keys)
            dkdv = _step(
                True,
                (_cdiv(blocks, 2), Hkv, lay.n) if plan.pairs else (Hkv, lay.n, blocks),
                (*q_st[:2], *k_st[:3], *v_st[:3], *do_st[:2], *dk_st[:3], *dv_st[:3], lse_st[0], Sq, Hq // Hkv, q_hrow),
                dict(
                    HEAD_DIM=D,
                    BLOCK_M=lp.rows,
                    BLOCK_N=lp.keys,
                    IS_CAUSAL=bool(causal),
                    PAIRS=plan.pairs,
                    num_warps=lp.warps,
                ),
                "dkdv",
            )
        else:
            dkdv = _step(
                False,
                (Hkv, lay.n, _cdiv(lay.max_k, lp.keys)),
                (*q_st[:3], *k_st[:3], *v_st[:3], *do_st[:3], *dk_st[:3], *dv_st[:3], lse_st[0], Sq, Hq // Hkv),
                triton(lp),
                "dkdv",
            )
    dq = None
    if "dq" in parts:
        lp = plan.dq
        ints = (*q_st[:3], *k_st[:3], *v_st[:3], *do_st[:3], *dq_st[:3], lse_st[0], Sq, Hq // Hkv)
        if lp.kernel == "gluon":
            blocks = _cdiv(lay.max_q, lp.rows)
            dq = _step(
                True,
                (_cdiv(blocks, 2), Hq, lay.n) if plan.dq_pairs else (Hq, lay.n, blocks),
                ints,
                dict(
                    HEAD_DIM=D,
                    BLOCK_M=lp.rows,
                    BLOCK_N=lp.keys,
                    IS_CAUSAL=bool(causal),
                    PAIRS=plan.dq_pairs,
                    DEFER=plan.dq_defer,
                    num_warps=lp.warps,
                ),
                "dq",
            )
        else:
            dq = _step(
                False,
                (Hq, lay.n, _cdiv(lay.max_q, lp.rows)),
                ints,
                triton(lp),
                "dq",
            )
    streams = plan.streams if dkdv is not None and dq is not None else 1
    tma = any(x.tma for x in (plan.dkdv, plan.dq))
    return _BwdRecipe(copy_q, delta, dkdv, dq, streams, tma, (plan, *cfgs))
