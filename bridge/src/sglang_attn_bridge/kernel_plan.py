"""Which kernels run for a call, decided in one place: `plan()` returns the `KernelPlan` that kernel_launches.py
launches and the doctor prints.

The tuning table (`config.py`) says what each head dim would like; whether that can run depends on the device (a
Hopper GPU for the Gluon kernels, TMA and inline PTX), the installed Triton (the Gluon kernels are written against
3.6's API) and the call (window, softcap, dtype, GQA group, strides and alignment). The plan resolves all of it, so a
launcher reads numbers and never decides, and every decision carries its reason.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from . import config, launch, settings

# The Gluon kernels are written against Triton 3.6's Gluon API (it changes between releases): what they use from it
GLUON_TRITON = (3, 6)
GLUON_API = {
    "triton.experimental.gluon": ("jit",),
    "triton.experimental.gluon.language": (
        "allocate_shared_memory",
        "warp_specialize",
        "thread_barrier",
        "NVMMASharedLayout",
        "NVMMADistributedLayout",
        "DotOperandLayout",
        "SwizzledSharedLayout",
        "inline_asm_elementwise",
    ),
    "triton.experimental.gluon.language.nvidia.hopper": ("mbarrier", "tma", "warpgroup_mma", "warpgroup_mma_wait"),
    "triton.experimental.gluon.language.nvidia.hopper.tma": ("async_copy_global_to_shared", "make_tensor_descriptor"),
}


def _release(version: str) -> tuple:
    return tuple(int(x) for x in version.split(".")[:2])


def gluon_api_missing(version: str | None = None) -> str:
    """Why this Triton cannot define the Gluon kernels ('' when it can), by looking, not by trying: its release and
    the Gluon names the kernels use. An error inside the kernel modules is then an error, never "no Gluon"."""
    version = triton.__version__ if version is None else version
    if _release(version) != GLUON_TRITON:
        return f"the Gluon kernels are written for Triton 3.6, this is Triton {version}"
    if importlib.util.find_spec("triton.experimental.gluon") is None:
        return "this Triton has no Gluon"
    for module, names in GLUON_API.items():
        mod = importlib.import_module(module)
        missing = [n for n in names if not hasattr(mod, n)]
        if missing:
            return f"this Triton's Gluon lacks {module}.{', '.join(missing)}"
    return ""


_GLUON_MISSING = gluon_api_missing()
if not _GLUON_MISSING:
    from .kernels.dkdv_sm90 import dkdv_sm90_kernel
    from .kernels.dq_sm90 import dq_sm90_kernel
    from .kernels.forward_ws_sm90 import ROWS as WS_ROWS
    from .kernels.forward_ws_sm90 import attn_fwd_ws_sm90_kernel
else:  # the Triton kernels serve every call
    dkdv_sm90_kernel = dq_sm90_kernel = attn_fwd_ws_sm90_kernel = WS_ROWS = None

GLUON_FWD_ROWS = 192  # query rows of one Gluon forward work item: 3 consumer warpgroups of 64 (its ROWS)
assert WS_ROWS is None or WS_ROWS.value == GLUON_FWD_ROWS
GLUON_KEYS = 64  # the Gluon forward's key tile: sglang's BLOCK_N, which fixes the order of the softmax sums
GLUON_FWD_WARPS = 4  # warps of the Gluon forward's default partition; its workers add the other warpgroups
GLUON_FWD_REGS = 128  # its register cap: 4 warpgroups at 128 fill the register file, which it splits (setmaxnreg)
GLUON_DKDV_BUFFERS = 2  # the Gluon dK/dV kernel's query-tile buffers (the next tile lands while this one is used)
GLUON_DQ_BUFFERS = 2  # the Gluon dQ kernel's key-tile buffers, likewise


def gluon_unavailable(device: torch.device) -> str:
    """Why the Gluon kernels (forward, dK/dV, dQ) cannot run on `device`, or '' when they can."""
    if dkdv_sm90_kernel is None:
        return _GLUON_MISSING
    if device.type != "cuda" or torch.version.hip or torch.cuda.get_device_capability(device)[0] != 9:
        return "the Gluon kernels need a Hopper (sm_90) GPU: wgmma"
    return ""


def _allocator_hook() -> bool:
    """Device-built TMA descriptors need scratch memory through `triton.set_allocator`, which older Tritons lack."""
    return importlib.util.find_spec("triton.runtime._allocation") is not None and hasattr(triton, "set_allocator")


@dataclass(frozen=True)
class Target:
    """What the kernel choice needs to know about the device a call runs on. `Target.of(device)` describes a real
    one; tests build others (a Hopper GPU with Triton 3.6, say) to see what would run there."""

    interpreting: bool = False  # Triton's CPU interpreter (TRITON_INTERPRET=1): the interpreter's small tiles
    ptx: bool = False  # an NVIDIA GPU (not ROCm, not the interpreter): inline PTX (mul.rn, ex2.approx.ftz) compiles
    tma: bool = False  # tiles can load through TMA descriptors: sm_90+ (or the interpreter) and a Triton that has them
    gluon: str = "no GPU"  # why the Gluon kernels cannot run here; '' when they can
    streams: bool = False  # a CUDA (or ROCm) device: a second stream exists

    @classmethod
    def of(cls, device: torch.device) -> Target:
        """The device's Target, worked out once per device and settings (every attention call asks)."""
        s = settings.current()
        return _target_of(device, s.interpreter, s.portable)

    @classmethod
    def _probe(cls, device: torch.device, interp: bool, portable: bool = False) -> Target:
        gpu = device.type == "cuda"
        nvidia = gpu and not torch.version.hip and not portable
        sm90 = nvidia and torch.cuda.get_device_capability(device)[0] >= 9
        has_desc = hasattr(tl, "make_tensor_descriptor")
        if interp:
            gluon = "the Triton interpreter runs no Gluon"
        elif portable:
            gluon = "the portable kernels were asked for (SGLANG_ATTN_BRIDGE_PORTABLE)"
        else:
            gluon = gluon_unavailable(device)
        return cls(
            interpreting=interp,
            ptx=nvidia and not interp,
            tma=has_desc and ((interp and not portable) or (sm90 and _allocator_hook())),
            gluon=gluon,
            streams=gpu,
        )


@functools.cache
def _target_of(device: torch.device, interp: bool, portable: bool) -> Target:
    return Target._probe(device, interp, portable)


@dataclass(frozen=True)
class Launch:
    """One kernel as it will be launched. Printed as `KERNEL ROWSxKEYS wWARPS sSTAGES [regs<=CAP] [tma]`."""

    kernel: str  # "gluon" (kernels/*_sm90.py, Hopper) or "triton" (kernels/forward.py, kernels/backward.py)
    rows: int  # query rows per program (forward, dQ) or per step (dK/dV)
    keys: int  # keys per step (forward, dQ) or per program (dK/dV; with key-block pairs, per block)
    warps: int
    stages: int  # Triton's load pipeline depth; the Gluon forward's K/V ring slots; the Gluon dK/dV's Q/dO buffers
    max_regs: int = 0  # register cap per thread (Triton's maxnreg), 0 = none
    tma: bool = False  # tiles through TMA descriptors (the Gluon kernels always) rather than masked loads

    def __str__(self) -> str:
        extra = (f" regs<={self.max_regs}" if self.max_regs else "") + (" tma" if self.tma else "")
        return f"{self.kernel} {self.rows}x{self.keys} w{self.warps} s{self.stages}{extra}"


@dataclass(frozen=True)
class KernelPlan:
    """What runs for one call: the forward, the backward's dK/dV and dQ kernels (the Delta kernel always runs first,
    64 rows), the forward's arithmetic as it will compile, and the streams. `why` says why each kernel was chosen."""

    forward: Launch
    dkdv: Launch
    dq: Launch
    interior: int  # the forward's handling of fully visible tiles (config.FwdConfig.interior), as it will compile
    exp_ftz: bool  # the forward's exp as ex2.approx.ftz (NVIDIA only; not exact, off in the committed tables)
    precise: bool  # fp32 on a GPU: libdevice exp/log in the forward and backward (FlashAttention's rule vs fp64)
    fast: bool  # FlashAttention's arithmetic in the Triton forward: NOT bit-exact with sglang (a bench yardstick)
    l2_group_mb: int  # the Gluon forward's L2 groups of (sequence, head) pairs, 0 = one group
    pairs: bool  # the Gluon dK/dV kernel runs and a program takes key block j, then the last-j one
    dq_pairs: bool  # the Gluon dQ kernel runs and a program takes query block j, then the last-j one
    dq_defer: bool  # the Gluon dQ kernel runs and each step's dQ product runs under the next step's products
    streams: int  # 2: dQ on a second stream beside dK/dV; 1: dK/dV then dQ
    why: tuple  # one line per choice: forward, dK/dV, dQ, streams

    def describe(self) -> str:
        return (
            f"fwd {self.forward} interior={self.interior}{' ftz' if self.exp_ftz else ''}"
            f"{' precise' if self.precise else ''}"
            f"{' fast' if self.fast else ''} | dK/dV {self.dkdv}{' pairs' if self.pairs else ''} | dQ {self.dq}"
            f"{' pairs' if self.dq_pairs else ''}{' defer' if self.dq_defer else ''}"
            f" | {self.streams} stream(s)"
        )


def tma_aligned(t: torch.Tensor) -> bool:
    """Whether TMA can load `t`, by its rule: the base address and every stride but the last a multiple of 16 bytes."""
    return t.data_ptr() % 16 == 0 and all(st * t.element_size() % 16 == 0 for st in t.stride()[:-1])


def _gluon_skip(target: Target, q: torch.Tensor, window, softcap) -> str:
    """Why neither Gluon kernel covers this call ('' when both could): 16-bit types, head dim 64/128, no window or
    softcap, on a device Gluon runs on."""
    if target.gluon:
        return target.gluon
    if window is not None:
        return "sliding window"
    if softcap:
        return "softcap"
    if q.shape[-1] not in (64, 128):
        return f"head dim {q.shape[-1]}, Gluon covers 64 and 128"
    if q.dtype not in (torch.float16, torch.bfloat16):
        return f"{str(q.dtype).replace('torch.', '')}, Gluon covers fp16 and bf16"
    return ""


def _plan_forward(cfg: config.FwdConfig, target: Target, q, window, softcap, compute_o, tma_ok: bool) -> tuple:
    """(Launch, why) of the forward: the warp-specialised Gluon forward where configured and it applies (it also needs
    sglang's arithmetic and the output wanted, not the LSE-only pass), the Triton forward elsewhere."""
    if not cfg.gluon_ws:
        skip = target.gluon or "the tuned choice for this head dim"
    elif not cfg.exact:
        skip = "exact=False asks for FlashAttention's arithmetic"
    elif not compute_o:
        skip = "LSE only"
    else:
        skip = _gluon_skip(target, q, window, softcap) or (
            "" if tma_ok else "a view that TMA cannot load (16-byte rule)"
        )
    if not skip:
        return (
            Launch("gluon", GLUON_FWD_ROWS, GLUON_KEYS, GLUON_FWD_WARPS, cfg.gluon_ws, GLUON_FWD_REGS, True),
            "forward: Gluon (persistent, warp-specialised)",
        )
    return (
        Launch("triton", cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages, cfg.max_regs, cfg.tma and tma_ok),
        f"forward: Triton: {skip}",
    )


def q_head_rows(q: torch.Tensor, whole_rows: bool, block_m: int) -> int:
    """How many rows of q's token stride apart its heads are, where the Gluon dK/dV kernel can address a GQA
    group's heads as row blocks of one TMA view (a [B, H, S, D] q as transformers hands it over, every sequence a
    whole row of S tokens, S a multiple of the kernel's query tile, so no tile reaches the next head); else 0."""
    sqs, sqh = q.stride(1), q.stride(2)
    if not whole_rows or sqh == q.shape[-1] or sqs <= 0 or sqh % sqs or q.shape[1] % block_m:
        return 0
    rows = sqh // sqs
    return rows if rows >= q.shape[1] else 0


def _plan_dkdv(
    cfg: config.BwdConfig,
    target: Target,
    q,
    k,
    window,
    softcap,
    do_heads_adjacent: bool,
    tma_ok: bool,
    whole_rows: bool = False,
) -> tuple:
    """(Launch, why) of dK/dV: the Gluon kernel where configured and it applies (it also needs a GQA group's query
    heads in one TMA view: side by side in memory, or a whole-row [B, H, S, D] q (`q_head_rows`), and GQA groups of
    at least `gluon_min_group`), the Triton kernel elsewhere."""
    D = q.shape[-1]
    group = q.shape[2] // k.shape[2]
    if not cfg.gluon_dkdv:
        skip = target.gluon or "the tuned choice for this head dim"
    elif gluon_skip := _gluon_skip(target, q, window, softcap):
        skip = gluon_skip
    elif group < cfg.gluon_min_group:
        skip = f"GQA group of {group}, Gluon from {cfg.gluon_min_group}: shorter programs do not repay its set-up"
    elif not do_heads_adjacent:
        skip = "output-gradient heads not side by side in memory"
    elif q.stride(2) != D and not q_head_rows(q, whole_rows, cfg.gluon_dkdv[0]):
        skip = "query heads neither side by side in memory nor whole rows of a [B, H, S, D] tensor"
    elif not tma_ok:
        skip = "a view that TMA cannot load (16-byte rule)"
    else:
        skip = ""
    if not skip:
        rows, keys, warps = cfg.gluon_dkdv
        return Launch("gluon", rows, keys, warps, GLUON_DKDV_BUFFERS, 0, True), "dK/dV: Gluon (products overlapped)"
    return (
        Launch("triton", cfg.block_m1, cfg.block_n1, cfg.num_warps, cfg.num_stages, cfg.max_regs, cfg.tma and tma_ok),
        f"dK/dV: Triton: {skip}",
    )


def _plan_dq(cfg: config.BwdConfig, target: Target, q, window, softcap, tma_ok: bool) -> tuple:
    """(Launch, why) of dQ: the Gluon kernel where configured and it applies (one program per query head, so any
    head layout TMA can load), the Triton kernel elsewhere."""
    if not cfg.gluon_dq:
        skip = target.gluon or "the tuned choice for this head dim"
    elif gluon_skip := _gluon_skip(target, q, window, softcap):
        skip = gluon_skip
    elif not tma_ok:
        skip = "a view that TMA cannot load (16-byte rule)"
    else:
        skip = ""
    if not skip:
        rows, keys, warps = cfg.gluon_dq
        return Launch("gluon", rows, keys, warps, GLUON_DQ_BUFFERS, 0, True), "dQ: Gluon (products overlapped)"
    return (
        Launch(
            "triton",
            cfg.block_m2,
            cfg.block_n2,
            cfg.num_warps2 or cfg.num_warps,
            cfg.num_stages2 or cfg.num_stages,
            cfg.max_regs2,
            cfg.tma2 and tma_ok,
        ),
        f"dQ: Triton: {skip}",
    )


def plan(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window=None,
    softcap=0.0,
    compute_o: bool = True,
    do: torch.Tensor | None = None,
    target: Target | None = None,
    whole_rows: bool = False,
    long_call: bool = True,
) -> KernelPlan:
    """The kernels that run for attention over q [B, Sq, Hq, D] and k/v [B, Sk, Hkv, D] (views whose last dim is
    contiguous). `compute_o=False` is the LSE-only forward that serves sglang's path; `do` is the output gradient
    (None: plan the backward for a fresh contiguous one, which is what autograd passes for our contiguous output);
    `target` defaults to q's device; `whole_rows`: every sequence of the layout is a whole row of the batch (what
    lets the Gluon dK/dV kernel read a [B, H, S, D] q in place); `long_call`: the call has at least the config's
    `overlap_min_scores` scores (what a second stream needs to pay for itself). Plans are kept per (tables, target,
    shapes, strides, dtypes, alignment, flags): every attention call asks, and the answer depends on nothing else."""
    target = Target.of(q.device) if target is None else target
    fcfg = config.fwd_config(q.shape[-1], target.interpreting)
    bcfg = config.bwd_config(q.shape[-1], target.interpreting)
    key = (
        id(fcfg),
        id(bcfg),
        target,
        tensor_key(q),
        tensor_key(k),
        tensor_key(v),
        None if do is None else tensor_key(do),
        window is None,
        bool(softcap),
        bool(compute_o),
        bool(whole_rows),
        bool(long_call),
    )
    hit = _plans.get(key)
    if hit is not None:
        return hit[0]
    if len(_plans) > 4096:
        _plans.clear()
        launch.clear()  # its keys hold plan ids
    p = _plan(fcfg, bcfg, target, q, k, v, window, softcap, compute_o, do, whole_rows, long_call)
    _plans[key] = (p, fcfg, bcfg)  # holding the configs keeps their ids unique while the entry lives
    return p


_plans: dict = {}


def tensor_key(t: torch.Tensor) -> tuple:
    """What a plan or a launch specializes on for a tensor: shape, strides (they fix the integer arguments), dtype,
    16-byte alignment."""
    return t.shape, t.stride(), t.dtype, t.data_ptr() % 16 == 0


def _plan(
    fcfg, bcfg, target: Target, q, k, v, window, softcap, compute_o, do, whole_rows=False, long_call=True
) -> KernelPlan:
    if do is None:  # a fresh contiguous [B, Sq, Hq, D] tensor: allocations are aligned, strides follow the shape
        D, el = q.shape[-1], q.element_size()
        do_heads, do_aligned = True, all(n * el % 16 == 0 for n in (D, q.shape[2] * D, q.shape[1] * q.shape[2] * D))
    else:
        do_heads, do_aligned = do.stride(2) == q.shape[-1], tma_aligned(do)
    tma_ok = target.tma and tma_aligned(q) and tma_aligned(k) and tma_aligned(v)  # TMA can load q, k and v here
    fwd, why_fwd = _plan_forward(fcfg, target, q, window, softcap, compute_o, tma_ok)
    dkdv, why_dkdv = _plan_dkdv(bcfg, target, q, k, window, softcap, do_heads, tma_ok and do_aligned, whole_rows)
    dq, why_dq = _plan_dq(bcfg, target, q, window, softcap, tma_ok and do_aligned)
    streams = 2 if bcfg.overlap and target.streams and long_call else 1
    if streams == 2:
        why_streams = "streams: dQ on a second stream beside dK/dV"
    elif not bcfg.overlap:
        why_streams = "streams: one: overlap is off"
    elif not target.streams:
        why_streams = "streams: one: no GPU streams here"
    else:
        why_streams = (
            f"streams: one: a short call (under {bcfg.overlap_min_scores:,} scores), where the second stream's "
            "hand-off costs more CPU time than its overlap saves on the GPU"
        )
    # interior=3 and exp_ftz are inline PTX: elsewhere interior=1 gives the same rounding, and the plain exp runs
    return KernelPlan(
        forward=fwd,
        dkdv=dkdv,
        dq=dq,
        interior=1 if fcfg.interior == 3 and not target.ptx else fcfg.interior,
        exp_ftz=fcfg.exp_ftz and target.ptx,
        precise=q.dtype == torch.float32 and not target.interpreting,
        fast=not fcfg.exact and not softcap,
        l2_group_mb=fcfg.gluon_group_mb,
        pairs=bcfg.gluon_pairs and dkdv.kernel == "gluon",
        dq_pairs=bcfg.gluon_dq_pairs and dq.kernel == "gluon",
        dq_defer=bcfg.gluon_dq_defer and dq.kernel == "gluon",
        streams=streams,
        why=(why_fwd, why_dkdv, why_dq, why_streams),
    )
