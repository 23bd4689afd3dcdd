"""Kernel tuning table: block sizes, warps, pipeline stages, TMA and register caps per head dimension, in one place.

The forward's BLOCK_N is fixed at 64 on every device: it fixes the order of the softmax reduction, which is what
makes our forward agree bit for bit with sglang's deterministic kernel. On the H200 the bits did not depend on
BLOCK_M (64, 128 or the Gluon forward's 3 x 64), warps, pipeline stages or K/V slots (bench/check_h200.py and the
bench's tuning check torch.equal against sglang for every forward variant), so those are tuned freely; `interior`
can change bits (only 2, at D128) and `exp_ftz` could in a degenerate case (its comment below).
The interpreter (TRITON_INTERPRET=1, CPU) gets small tiles so the tests stay fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    # tiles every row of the block fully sees: 0 = sglang's full mask select, 1 = a select on the key bound only
    # (cheaper, still stops `qk*scale - max` being fused into an FMA), 2 = no select (changed bits at D128 on the
    # H200, stayed bit-exact at D64: only use 2 where bench/check_h200.py proved it), 3 = no select, the scale
    # multiply as an unfusable PTX mul.rn (GPU only; the rounding sglang's select forces, one instruction less)
    interior: int = 1
    tma: bool = False  # Q/K/V tiles through TMA descriptors where the GPU has the copy engine (same values)
    max_regs: int = 0  # cap on registers per thread (Triton's maxnreg), 0 = none: trades spills for resident programs
    exact: bool = True  # False: exp2/in-place P.V arithmetic (faster, NOT bit-exact with sglang; bench yardstick)
    # exp as ex2.approx.ftz (NVIDIA only): probabilities below 2^-126 become 0 rather than subnormal, three
    # instructions fewer per score. Bits equal sglang's in every check, adversarial logit scales included; in theory
    # they could differ only where an output element's accumulator is itself below ~2^-100 (docs/bridge-design.md).
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
    block_m1: int  # dK/dV kernel: query rows per step
    block_n1: int  # dK/dV kernel: keys owned by one program
    block_m2: int  # dQ kernel: query rows owned by one program
    block_n2: int  # dQ kernel: keys per step
    num_warps: int
    num_stages: int
    num_warps2: int = 0  # dQ kernel's own warps/stages (0: same as the dK/dV kernel)
    num_stages2: int = 0
    tma: bool = False  # dK/dV kernel: tiles through TMA descriptors where the GPU has the copy engine (same values)
    tma2: bool = False  # dQ kernel: the same choice
    max_regs: int = 0  # dK/dV kernel's register cap (maxnreg), 0 = none: more resident programs, maybe spills
    max_regs2: int = 0  # dQ kernel's
    # (rows per step, keys per program, warps) of kernels/dkdv_sm90.py, the Gluon dK/dV kernel (Hopper: products
    # overlapped with the exponentials, query tiles double-buffered by TMA), used where it applies; () = never.
    # Where it does not apply (other GPUs, window, softcap) the Triton dK/dV kernel runs with the fields above.
    gluon_dkdv: tuple = ()
    gluon_min_group: int = 1  # ... and only for GQA groups of at least this many query heads per KV head
    # Gluon dK/dV: program j takes key block j and then block last-j, so under a causal mask all programs have the
    # same work and any launch order is balanced; the programs of one (KV head, sequence) then launch side by side
    # and read the same Q/dO tiles while they are in L2, and each program's set-up serves two blocks
    gluon_pairs: bool = False
    # the dQ kernel on a second CUDA stream, launched right after the dK/dV kernel: its programs fill the SMs that
    # the dK/dV kernel's last wave leaves idle (the two write different tensors, so the bits do not change)
    overlap: bool = True


# head_dim bucket (next power of two) -> config. D64/D128 tuned on the H200 (docs/bridge-h200.md; times for 32/8
# heads on 1x8192 / 16 packed sequences of 16384 tokens, single calls from an idle GPU unless marked device time,
# which leaves out the ~0.1 ms launch); the rest are untuned starting points. TMA pays only where
# it frees registers for a second resident program (the D128 forward): elsewhere the per-program descriptor set-up
# costs more than it saves on short programs.
GPU_FWD = {
    16: FwdConfig(128, 64, 4, 2),
    32: FwdConfig(128, 64, 4, 2),
    # 0.77 / 0.37 ms with exp_ftz (0.88 / 0.41 without; the Gluon forward: 1.06 / 0.55, too little matrix work per
    # score at D64 to hide three warpgroups' softmax)
    64: FwdConfig(64, 64, 4, 3, interior=2, exp_ftz=True),
    # the Gluon forward, 4 K/V slots, items from a counter in 32 MB groups: 0.92 / 0.47 ms device time (1.13 / 0.60
    # from an idle GPU; the static round-robin it replaced: 1.18 / 0.72); the Triton fields serve LSE-only, window
    # and softcap calls: 1.27 / 0.63 ms with exp_ftz (1.33 / 0.65 without)
    128: FwdConfig(128, 64, 8, 2, interior=3, tma=True, max_regs=128, exp_ftz=True, gluon_ws=4, gluon_group_mb=32),
    256: FwdConfig(64, 64, 8, 1),
}
GPU_BWD = {
    16: BwdConfig(64, 128, 128, 64, 8, 2),
    32: BwdConfig(64, 128, 128, 64, 8, 2),
    # dK/dV: Gluon 64 rows x 64 keys, one warpgroup (two programs per SM) when a KV head serves 2+ query heads:
    # 32/8 heads 1.51 / 1.71 / 0.67 ms (1x8192 / 4x4096 / packed) against the Triton kernel's (32x64, 4 warps,
    # 3 stages) 1.70 / 1.87 / 0.68; with one query head per KV head its programs are too short to repay their set-up
    # (16/16: 1.05 / 1.00 / 0.58 against 0.94 / 0.87 / 0.42). dQ 0.89 / 0.47 ms. Key-block pairs (`gluon_pairs`) lose
    # 4-6% here on long sequences
    64: BwdConfig(32, 64, 64, 64, 4, 3, gluon_dkdv=(64, 64, 4), gluon_min_group=2),
    # dK/dV: Gluon 64x64, one warpgroup: 2.10 / 0.92 ms; Triton kernel (64x128, 8 warps, 1 stage): 2.66 / 1.11 ms
    # (16/16 heads: 1.11 / 0.60 against 1.41 / 0.66). dQ 1.48 / 0.68 ms: 32-key steps under a 128-register cap fit
    # two dQ programs per SM (64-key steps, no cap: 1.38 / 0.74 ms; the packed batch decides). Whole backward,
    # device time, 32/8 and 16/16 on 1x8192 / 4x4096 / packed: key-block pairs and dQ beside dK/dV 3.11 / 3.27 / 1.17
    # and 1.61 / 1.74 / 0.71 ms, against 3.22 / 3.42 / 1.35 and 1.64 / 1.82 / 0.79 one block per program, one stream
    128: BwdConfig(64, 128, 128, 32, 8, 1, 8, 3, max_regs2=128, gluon_dkdv=(64, 64, 4), gluon_pairs=True),
    256: BwdConfig(32, 64, 64, 32, 8, 1),
}
INTERPRETER_FWD = FwdConfig(32, 64, 4, 1)
INTERPRETER_BWD = BwdConfig(32, 32, 32, 32, 4, 1)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _bucket(head_dim: int) -> int:
    b = 16
    while b < head_dim:
        b *= 2
    return b


def fwd_config(head_dim: int) -> FwdConfig:
    if interpreting():
        return INTERPRETER_FWD
    return GPU_FWD[_bucket(head_dim)]


def bwd_config(head_dim: int) -> BwdConfig:
    if interpreting():
        return INTERPRETER_BWD
    return GPU_BWD[_bucket(head_dim)]


def set_config(head_dim: int, fwd: FwdConfig | None = None, bwd: BwdConfig | None = None, **changes) -> None:
    """Replace one head-dim bucket's entries (the bench sweeps variants through this)."""
    b = _bucket(head_dim)
    if fwd is not None:
        GPU_FWD[b] = fwd
    if bwd is not None:
        GPU_BWD[b] = bwd
    if changes:
        fwd_keys = {k: v for k, v in changes.items() if k in FwdConfig.__dataclass_fields__}
        if fwd_keys:
            GPU_FWD[b] = replace(GPU_FWD[b], **fwd_keys)
