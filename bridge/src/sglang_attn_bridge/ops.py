"""Launchers for the Triton kernels (and the Gluon forward and dK/dV on Hopper) on [B, S, H, D] `Varlen` views.

Tensors stay in the strided views transformers hands us (only the last dim must be contiguous), so a plain, padded or
packed batch needs no gather/scatter copies. Block sizes come from `config`.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from . import config
from .kernels.backward import delta_kernel, dkdv_kernel, dq_kernel
from .kernels.forward import attn_fwd_kernel
from .launch import launch
from .layout import Varlen

# The Gluon kernel is written against Triton 3.6's Gluon API (it changes between releases)
GLUON_TRITON = (3, 6)
try:
    from .kernels.dkdv_sm90 import dkdv_sm90_kernel
    from .kernels.forward_ws_sm90 import ROWS as WS_ROWS, attn_fwd_ws_sm90_kernel
except Exception:  # a Triton without Gluon, or whose Gluon cannot define them: the Triton kernels serve
    dkdv_sm90_kernel = attn_fwd_ws_sm90_kernel = WS_ROWS = None


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _prec(dtype: torch.dtype) -> str:
    # fp32 inputs get true fp32 products; half types are exact in any mode
    return "ieee" if dtype == torch.float32 else "tf32"


def _lay_args(lay: Varlen):
    return lay.row, lay.q_start, lay.k_start, lay.len_q, lay.len_k


def _window(window) -> int:
    return -1 if window is None else int(window)


def _use_tma(wanted: bool, *tensors: torch.Tensor) -> bool:
    """TMA tile loads where the copy engine exists (NVIDIA sm_90+; the interpreter emulates it), the installed Triton
    builds descriptors in kernels, and every tensor meets the 16-byte alignment rule; otherwise the kernels take the
    masked-load path, with identical values."""
    if not wanted or not hasattr(tl, "make_tensor_descriptor"):
        return False
    if not config.interpreting():
        dev = tensors[0].device
        if dev.type != "cuda" or torch.version.hip or _capability(dev)[0] < 9:
            return False
        if not _ensure_allocator(dev):
            return False
    return all(t.data_ptr() % 16 == 0 and all(st * t.element_size() % 16 == 0 for st in t.stride()[:-1])
               for t in tensors)


@functools.cache
def _capability(device: torch.device) -> tuple:
    return torch.cuda.get_device_capability(device)


def gluon_unavailable(device: torch.device) -> str:
    """Why the Gluon kernels (forward, dK/dV) cannot run on `device`, or '' when they can (the doctor prints this)."""
    if dkdv_sm90_kernel is None:
        return "this Triton has no usable Gluon"
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) != GLUON_TRITON:
        return f"it is written for Triton 3.6's Gluon, this is Triton {triton.__version__}"
    if device.type != "cuda" or torch.version.hip or _capability(device)[0] != 9:
        return "it needs a Hopper (sm_90) GPU: wgmma"
    return ""


_gluon_runs: dict = {}


def _gluon_ok(device: torch.device) -> bool:
    """gluon_unavailable(device) == '', remembered per device and Triton (every call asks)."""
    key = (device, gluon_unavailable, dkdv_sm90_kernel is None, triton.__version__)
    ok = _gluon_runs.get(key)
    if ok is None:
        ok = _gluon_runs[key] = not gluon_unavailable(device)
    return ok


def _gluon_case(q, window, softcap) -> bool:
    """What both Gluon kernels cover: 16-bit types, head dim 64/128, no window or softcap, on a device Gluon runs on."""
    return (not config.interpreting() and _gluon_ok(q.device) and window is None and not softcap
            and q.shape[-1] in (64, 128) and q.dtype in (torch.float16, torch.bfloat16))


def _use_gluon_dkdv(cfg: config.BwdConfig, q, k, v, do, window, softcap) -> bool:
    """The Gluon dK/dV kernel also needs a token's query heads side by side in memory (its TMA view spans a GQA
    group's heads) and GQA groups of at least `gluon_min_group`; elsewhere the Triton kernel runs."""
    if not cfg.gluon_dkdv or not _gluon_case(q, window, softcap) or q.shape[2] // k.shape[2] < cfg.gluon_min_group:
        return False
    D = q.shape[-1]
    return q.stride(2) == D and do.stride(2) == D and _use_tma(True, q, k, v, do)


def _use_gluon_fwd(cfg: config.FwdConfig, q, k, v, window, softcap, compute_o) -> bool:
    """The warp-specialised Gluon forward also needs sglang's arithmetic (cfg.exact) and the output wanted (not the
    LSE-only pass); elsewhere the Triton forward runs."""
    return (bool(cfg.gluon_ws) and cfg.exact and compute_o and _gluon_case(q, window, softcap)
            and _use_tma(True, q, k, v))


def _ptx(q: torch.Tensor) -> bool:
    """Inline PTX runs: an NVIDIA GPU (not ROCm, not the CPU interpreter)."""
    return q.device.type == "cuda" and not torch.version.hip and not config.interpreting()


def _interior(interior: int, q: torch.Tensor) -> int:
    """interior=3 is inline PTX (mul.rn): NVIDIA only; elsewhere the select of interior=1 gives the same rounding."""
    return 1 if interior == 3 and not _ptx(q) else interior


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


def _ensure_allocator(dev: torch.device) -> bool:
    """Device-built TMA descriptors need a little scratch memory through `triton.set_allocator`; install torch's
    allocator unless the caller set one (the setting is per thread: autograd runs the backward in its own).
    False where this Triton has no such hook."""
    try:
        from triton.runtime import _allocation
    except ImportError:
        return False
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device=dev))
    return True


@functools.cache
def _side_stream(device: torch.device) -> torch.cuda.Stream:
    return torch.cuda.Stream(device)


def _side_by_side(first, second, device: torch.device) -> None:
    """Launch `first` on the current stream and `second` on a second one, both after the work already queued, and
    make the current stream wait for both: the second kernel's programs fill the SMs that the first one's last wave
    leaves idle. Each launch allocates only on its own stream, and the caller's stream waits for the second before
    anything it queues later can reuse memory, so no tensor needs record_stream."""
    main = torch.cuda.current_stream(device)
    side = _side_stream(device)
    side.wait_stream(main)
    first()
    with torch.cuda.stream(side):
        second()
    main.wait_stream(side)


def forward_kernel(q, k, v, window=None, softcap=0.0) -> str:
    """Which in-tree forward a call that wants the output runs: "gluon" (Hopper) or "triton"."""
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    return "gluon" if _use_gluon_fwd(config.fwd_config(q.shape[-1]), q, k, v, window, softcap, True) else "triton"


def forward(q, k, v, lay: Varlen, scale: float, causal: bool, window=None, softcap=0.0, compute_o=True, gluon=True):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] views -> (o [B, Sq, Hq, D] contiguous or None, lse [Hq, B*Sq] fp32).

    `window` is in sglang's convention (query i sees key j iff i - j <= window), None for none. gluon=False keeps
    the Triton forward where the Gluon one would run (the probe checks each).
    """
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    B, Sq, Hq, D = q.shape
    Hkv = k.shape[2]
    cfg = config.fwd_config(D)
    lse = torch.empty((Hq, B * Sq), device=q.device, dtype=torch.float32)
    o = None
    if compute_o:
        o = (torch.empty if lay.covers_all else torch.zeros)((B, Sq, Hq, D), device=q.device, dtype=q.dtype)
    o_arg = o if o is not None else q
    strides = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
               v.stride(0), v.stride(1), v.stride(2), o_arg.stride(0), o_arg.stride(1), o_arg.stride(2))
    if gluon and _use_gluon_fwd(cfg, q, k, v, window, softcap, compute_o):
        nblk = triton.cdiv(lay.max_q, WS_ROWS.value)
        pairs = Hq * lay.n
        items = pairs * nblk
        group_pairs = l2_group_pairs(pairs, lay.max_k, D, q.element_size(), Hq // Hkv, cfg.gluon_group_mb)
        counter = torch.zeros(1, dtype=torch.int32, device=q.device)  # the next item to take
        # persistent: one program per multiprocessor; 4 warpgroups at maxnreg=128 fill the register file, which the
        # kernel splits between them (setmaxnreg)
        launch(attn_fwd_ws_sm90_kernel, (min(items, _sm_count(q.device)),), (
            q, k, v, o, lse, *_lay_args(lay), float(scale), 1.0, *strides, lse.stride(0), Sq, Hq // Hkv, Hq,
            lay.n, nblk, group_pairs, items, counter,
        ), dict(
            HEAD_DIM=D, STAGES=cfg.gluon_ws, IS_CAUSAL=bool(causal), INTERIOR=cfg.interior,
            EXP_FTZ=cfg.exp_ftz, num_warps=4, maxnreg=128,
        ))
        return o, lse
    grid = (Hq, lay.n, triton.cdiv(lay.max_q, cfg.block_m))
    launch(attn_fwd_kernel, grid, (
        q, k, v, o_arg, lse, *_lay_args(lay), float(scale), 1.0, *strides, lse.stride(0), Sq, Hq // Hkv,
    ), dict(
        HEAD_DIM=D, BLOCK_D=max(16, triton.next_power_of_2(D)), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        IS_CAUSAL=bool(causal), WINDOW=_window(window), SOFTCAP=float(softcap or 0.0),
        COMPUTE_O=bool(compute_o), INTERIOR=_interior(cfg.interior, q), DOT_PREC=_prec(q.dtype),
        TMA=_use_tma(cfg.tma, q, k, v), FAST=not cfg.exact and not softcap, EXP_FTZ=cfg.exp_ftz and _ptx(q),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **_max_regs(cfg.max_regs),
    ))
    return o, lse


def backward(do, q, k, v, o, lse, lay: Varlen, scale: float, causal: bool, window=None, softcap=0.0,
             parts=("dkdv", "dq")):
    """Gradients shaped [B, S, H, D] with the strides of q/k/v (so autograd hands them on without a layout copy),
    each written by exactly one program. `parts` lets the bench time the dK/dV and dQ kernels apart."""
    do, q, k, v, o = (_last_dim_contiguous(t) for t in (do, q, k, v, o))
    alloc = torch.empty_like if lay.covers_all else torch.zeros_like
    dq, dk, dv = alloc(q), alloc(k), alloc(v)
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    cfg = config.bwd_config(D)
    if q.stride(2) != D and cfg.gluon_dkdv and "dkdv" in parts and _gluon_case(q, window, softcap):
        # transformers hands over q as a [B, H, S, D] tensor: one copy with a token's heads side by side lets the
        # Gluon dK/dV kernel run (its TMA view spans a GQA group's heads), which saves far more than the copy costs
        qc = q.contiguous()
        if _use_gluon_dkdv(cfg, qc, k, v, do, window, softcap):
            q = qc
    block_d = max(16, triton.next_power_of_2(D))
    delta = torch.empty_like(lse)
    common = dict(IS_CAUSAL=bool(causal), WINDOW=_window(window), SOFTCAP=float(softcap or 0.0),
                  DOT_PREC=_prec(q.dtype))

    launch(delta_kernel, (triton.cdiv(lay.max_q, 64), Hq, lay.n), (
        o, do, delta, lay.row, lay.q_start, lay.len_q, o.stride(0), o.stride(1), o.stride(2), do.stride(0),
        do.stride(1), do.stride(2), lse.stride(0), Sq,
    ), dict(
        HEAD_DIM=D, BLOCK_D=block_d, BLOCK_M=64,
    ))

    def dkdv():
        if _use_gluon_dkdv(cfg, q, k, v, do, window, softcap):
            rows, keys, warps = cfg.gluon_dkdv
            blocks = triton.cdiv(lay.max_k, keys)
            grid = (triton.cdiv(blocks, 2), Hkv, lay.n) if cfg.gluon_pairs else (Hkv, lay.n, blocks)
            launch(dkdv_sm90_kernel, grid, (
                q, k, v, do, dk, dv, lse, delta, *_lay_args(lay), float(scale), q.stride(0), q.stride(1),
                k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2), do.stride(0),
                do.stride(1), dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1),
                dv.stride(2), lse.stride(0), Sq, Hq // Hkv,
            ), dict(
                HEAD_DIM=D, BLOCK_M=rows, BLOCK_N=keys, IS_CAUSAL=bool(causal), PAIRS=cfg.gluon_pairs,
                num_warps=warps,
            ))
            return
        launch(dkdv_kernel, (Hkv, lay.n, triton.cdiv(lay.max_k, cfg.block_n1)), (
            q, k, v, do, dk, dv, lse, delta, *_lay_args(lay), float(scale), q.stride(0), q.stride(1),
            q.stride(2), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            do.stride(0), do.stride(1), do.stride(2), dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0),
            dv.stride(1), dv.stride(2), lse.stride(0), Sq, Hq // Hkv,
        ), dict(
            HEAD_DIM=D, BLOCK_D=block_d, BLOCK_M=cfg.block_m1, BLOCK_N=cfg.block_n1, **common,
            TMA=_use_tma(cfg.tma, q, k, v, do), num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            **_max_regs(cfg.max_regs),
        ))

    def dq_():
        launch(dq_kernel, (Hq, lay.n, triton.cdiv(lay.max_q, cfg.block_m2)), (
            q, k, v, do, dq, lse, delta, *_lay_args(lay), float(scale), q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2), do.stride(0),
            do.stride(1), do.stride(2), dq.stride(0), dq.stride(1), dq.stride(2), lse.stride(0), Sq, Hq // Hkv,
        ), dict(
            HEAD_DIM=D, BLOCK_D=block_d, BLOCK_M=cfg.block_m2, BLOCK_N=cfg.block_n2, **common,
            TMA=_use_tma(cfg.tma2, q, k, v, do), num_warps=cfg.num_warps2 or cfg.num_warps,
            num_stages=cfg.num_stages2 or cfg.num_stages, **_max_regs(cfg.max_regs2),
        ))

    if "dkdv" in parts and "dq" in parts and cfg.overlap and q.is_cuda:
        _side_by_side(dkdv, dq_, q.device)
    else:
        for name, run in (("dkdv", dkdv), ("dq", dq_)):
            if name in parts:
                run()
    return dq, dk, dv
