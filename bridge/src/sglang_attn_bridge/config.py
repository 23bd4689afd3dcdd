"""Kernel tuning table: block sizes, warps, pipeline stages, TMA and register caps per head dimension, in one place.

The forward's BLOCK_N is fixed at 64 on every device: it fixes the order of the softmax reduction, which is what
makes our forward agree bit for bit with sglang's deterministic kernel. The bits do not depend on BLOCK_M (64, 128 or
the Gluon forward's 3 x 64), warps, pipeline stages or K/V slots, so those are tuned freely. What the committed
entries run is sglang's arithmetic instruction for instruction (the same exp, the same unfused scale multiply), so
they are exact by construction; `interior=2`, `exp_ftz` and `exact=False` are not, and are here only so the bench can
measure what exactness costs.
The interpreter (TRITON_INTERPRET=1, CPU) gets small tiles so the tests stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import settings
from .errors import BridgeConfigError


@dataclass(frozen=True)
class FwdConfig:
    """The forward's tuning for one head-dim bucket. The first four fields tile the Triton forward
    (kernels/forward.py): query rows per program, keys per step, warps, load pipeline stages.

    `interior` says what the Triton forward does on tiles that every row of the block sees whole (on the tiles at a
    causal edge or a sequence end it always keeps sglang's full select):
      0  sglang's full mask select, as on every other tile;
      1  a select on the key bound only: cheaper, and still stops `qk * scale - max` being fused into an FMA, which
         would round differently from sglang;
      2  no select: ptxas may then fuse `qk * scale - max` into an FMA, which rounds differently (it changed bits at
         D128 on the H200, and with softcap at D64): NOT exact by construction, the bench's yardstick only;
      3  no select, the scale multiply as an unfusable PTX `mul.rn` (NVIDIA only; elsewhere it runs as 1): the
         rounding sglang's select forces with one instruction less. Softcapped scores keep the select.
    """

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    interior: int = 1
    tma: bool = False  # Q/K/V tiles through TMA descriptors where the GPU has the copy engine (same values)
    max_regs: int = 0  # cap on registers per thread (Triton's maxnreg), 0 = none: trades spills for resident programs
    exact: bool = True  # False: exp2/in-place P.V arithmetic (faster, NOT bit-exact with sglang; bench yardstick)
    # exp as ex2.approx.ftz (NVIDIA only): probabilities below 2^-126 become 0 rather than subnormal, three
    # instructions fewer per score, and an output whose accumulator is itself that small (large logits) becomes 0
    # where sglang's is a subnormal: NOT exact, the bench measures what it would save
    exp_ftz: bool = False
    # K/V ring slots of kernels/forward_ws_sm90.py, the persistent warp-specialised Hopper forward (a TMA producer,
    # three consumer warpgroups of 64 rows); 0 = never. Where it does not apply (other GPUs, window, softcap, LSE
    # only) the Triton forward runs with the fields above.
    gluon_ws: int = 0
    # Gluon forward: programs take items in groups of (sequence, head) pairs whose K/V fit in this many MB of L2,
    # heaviest block first within a group; 0 = one group of all pairs
    gluon_group_mb: int = 0


@dataclass(frozen=True)
class BwdConfig:
    """The backward's tuning for one head-dim bucket. The backward runs three kernels: Delta (rowsum(dO * O)), dK/dV
    and dQ (kernels/backward.py; FA2's form, no atomics). Fields ending in 1 belong to the dK/dV kernel, fields
    ending in 2 to the dQ kernel (FA2's BLOCK_M1/N1, BLOCK_M2/N2 naming). `num_warps`/`num_stages` serve both unless
    the dQ kernel's own `num_warps2`/`num_stages2` are set; `tma`/`max_regs` are the dK/dV kernel's, `tma2`/`max_regs2`
    the dQ kernel's. Where the Gluon dK/dV kernel runs (`gluon_dkdv`), the dK/dV fields without it do not apply."""

    block_m1: int  # dK/dV kernel: query rows per step
    block_n1: int  # dK/dV kernel: keys owned by one program
    block_m2: int  # dQ kernel: query rows owned by one program
    block_n2: int  # dQ kernel: keys per step
    num_warps: int  # both kernels' warps, unless num_warps2 is set
    num_stages: int  # both kernels' load pipeline stages, unless num_stages2 is set
    num_warps2: int = 0  # dQ kernel's own warps (0: num_warps)
    num_stages2: int = 0  # dQ kernel's own stages (0: num_stages)
    tma: bool = False  # dK/dV kernel: tiles through TMA descriptors where the GPU has the copy engine (same values)
    tma2: bool = False  # dQ kernel: the same choice
    max_regs: int = 0  # dK/dV kernel's register cap (maxnreg), 0 = none: more resident programs, maybe spills
    max_regs2: int = 0  # dQ kernel's register cap
    # (rows per step, keys per program, warps) of kernels/dkdv_sm90.py, the Gluon dK/dV kernel (Hopper: products
    # overlapped with the exponentials, query tiles double-buffered by TMA), used where it applies; () = never.
    gluon_dkdv: tuple = ()
    gluon_min_group: int = 1  # ... and only for GQA groups of at least this many query heads per KV head
    # Gluon dK/dV: program j takes key block j and then block last-j, so under a causal mask all programs have the
    # same work and any launch order is balanced; the programs of one (KV head, sequence) then launch side by side
    # and read the same Q/dO tiles while they are in L2, and each program's set-up serves two blocks
    gluon_pairs: bool = False
    # (rows per program, keys per step, warps) of kernels/dq_sm90.py, the Gluon dQ kernel (the same overlap for the
    # dQ kernel's products), used where the Gluon dK/dV kernel's conditions hold; () = never
    gluon_dq: tuple = ()
    gluon_dq_pairs: bool = True  # Gluon dQ: program j takes query block j, then the last-j one (as gluon_pairs)
    # Gluon dQ: a step's dQ product runs under the next step's S and dP products instead of alone
    gluon_dq_defer: bool = True
    # the dQ kernel on a second CUDA stream, launched right after the dK/dV kernel: its programs fill the SMs that
    # the dK/dV kernel's last wave leaves idle (the two write different tensors, so the bits do not change)
    overlap: bool = True
    # ... only for calls of at least this many attention scores (query heads x sequences x longest query run x
    # longest key run): on the H200 a short call (2x2048 or 8x1024 tokens, 32 heads: 2.7e8) is bound by the CPU,
    # and the stream hand-off (event record and wait, the stream switch) made its fwd+bwd 1.06 ms instead of 0.79
    overlap_min_scores: int = 2**30


# head_dim bucket (next power of two) -> config. D64 and D128 are tuned on the H200 (docs/bridge-h200.md: the
# measurements and the reason for each choice); 16, 32 and 256 are untuned starting points.
GPU_FWD = {
    16: FwdConfig(128, 64, 4, 2),
    32: FwdConfig(128, 64, 4, 2),
    # the Triton forward: at D64 the Gluon forward has too little matrix work per score to hide its softmax
    64: FwdConfig(64, 64, 4, 3, interior=3),
    # the Gluon forward; the Triton fields (TMA frees the registers for two capped 8-warp programs per SM) serve
    # LSE-only, window and softcap calls
    128: FwdConfig(128, 64, 8, 2, interior=3, tma=True, max_regs=128, gluon_ws=4, gluon_group_mb=32),
    256: FwdConfig(64, 64, 8, 1),
}
GPU_BWD = {
    16: BwdConfig(64, 128, 128, 64, 8, 2),
    32: BwdConfig(64, 128, 128, 64, 8, 2),
    # Gluon dK/dV only for GQA groups of 2+ (one query head per KV head: programs too short to repay its set-up);
    # key-block pairs lose on long sequences at D64. Gluon dQ with its product deferred (every group size).
    64: BwdConfig(32, 64, 64, 64, 4, 3, gluon_dkdv=(64, 64, 4), gluon_min_group=2, gluon_dq=(64, 64, 4)),
    # Gluon dK/dV in key-block pairs, Gluon dQ in query-block pairs with its product deferred. The Triton dQ
    # fields (32-key steps under a 128-register cap: two programs per SM) serve window and softcap calls.
    128: BwdConfig(
        64, 128, 128, 32, 8, 1, 8, 3, max_regs2=128, gluon_dkdv=(64, 64, 4), gluon_pairs=True, gluon_dq=(64, 64, 4)
    ),
    256: BwdConfig(32, 64, 64, 32, 8, 1),
}
INTERPRETER_FWD = FwdConfig(32, 64, 4, 1)
INTERPRETER_BWD = BwdConfig(32, 32, 32, 32, 4, 1)


def interpreting() -> bool:
    return settings.current().interpreter


def _bucket(head_dim: int) -> int:
    b = 16
    while b < head_dim:
        b *= 2
    return b


def fwd_config(head_dim: int, interpreter: bool | None = None) -> FwdConfig:
    """The forward's config for `head_dim`; the interpreter's (small tiles) under TRITON_INTERPRET=1 or when asked."""
    if interpreting() if interpreter is None else interpreter:
        return INTERPRETER_FWD
    return GPU_FWD[_bucket(head_dim)]


def bwd_config(head_dim: int, interpreter: bool | None = None) -> BwdConfig:
    """The backward's config for `head_dim`, as `fwd_config` chooses."""
    if interpreting() if interpreter is None else interpreter:
        return INTERPRETER_BWD
    return GPU_BWD[_bucket(head_dim)]


_FWD_KEYS = set(FwdConfig.__dataclass_fields__)
_BWD_KEYS = set(BwdConfig.__dataclass_fields__)


def set_config(head_dim: int, fwd: FwdConfig | None = None, bwd: BwdConfig | None = None, **changes) -> None:
    """Replace one head-dim bucket's GPU entries (the bench sweeps variants through this): whole configs through
    `fwd`/`bwd`, single fields as keywords. A keyword that names a field of both configs (num_warps, num_stages,
    tma, max_regs) or of neither raises BridgeConfigError (a ValueError), and nothing changes."""
    ambiguous = sorted(_FWD_KEYS & _BWD_KEYS & changes.keys())
    if ambiguous:
        raise BridgeConfigError(
            f"set_config: {', '.join(ambiguous)} is a field of both FwdConfig and BwdConfig; pass "
            f"fwd=replace(fwd_config(d), ...) or bwd=replace(bwd_config(d), ...) instead"
        )
    unknown = sorted(changes.keys() - _FWD_KEYS - _BWD_KEYS)
    if unknown:
        raise BridgeConfigError(
            f"set_config: unknown field(s) {', '.join(unknown)}; FwdConfig has "
            f"{', '.join(FwdConfig.__dataclass_fields__)}; BwdConfig has "
            f"{', '.join(BwdConfig.__dataclass_fields__)}"
        )
    b = _bucket(head_dim)
    new_fwd = replace(fwd or GPU_FWD[b], **{k: v for k, v in changes.items() if k in _FWD_KEYS})
    new_bwd = replace(bwd or GPU_BWD[b], **{k: v for k, v in changes.items() if k in _BWD_KEYS})
    GPU_FWD[b], GPU_BWD[b] = new_fwd, new_bwd
