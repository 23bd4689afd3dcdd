"""Backward kernel probe: registers, spills and time of the dK/dV and dQ kernels per config (1x8192, 32/8, bf16).

Answers 'why is dK/dV slower per FLOP than dQ' without hardware counters: Triton reports n_regs and n_spills of
each compiled kernel. Prints one line per config.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import make_qkv, median_ms  # noqa: E402

from sglang_attn_bridge import config, layout, ops  # noqa: E402
from sglang_attn_bridge.kernels.backward import dkdv_kernel, dq_kernel  # noqa: E402


def compiled_info(kernel):
    """(registers, spills, shared bytes) of the most recently compiled specialisation."""
    try:
        for entry in kernel.device_caches.values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            k = list(cache.values())[-1]
            return getattr(k, "n_regs", "?"), getattr(k, "n_spills", "?"), getattr(k.metadata, "shared", "?")
    except Exception as e:
        return repr(e)[:80]


def main():
    torch.manual_seed(0)
    for d in (128, 64):
        q, k, v, cu = make_qkv([8192], 32, 8, d, torch.bfloat16)
        lay = layout.from_cu_seqlens(cu, cu, 8192, 8192)
        o, lse = ops.forward(q, k, v, lay, d ** -0.5, True)
        do = torch.randn_like(o)
        base = config.GPU_BWD[d]
        fl = 2 * 8192 * 8192 * 32 * d
        for bm, bn, w, st, sp in ((64, 128, 8, 1, False), (64, 128, 8, 1, True), (64, 128, 8, 2, True),
                                  (64, 128, 8, 3, True), (32, 128, 8, 2, True), (64, 64, 4, 3, True),
                                  (128, 128, 8, 1, True), (128, 128, 8, 2, True), (32, 64, 4, 3, True)):
            rl = sp
            c = replace(base, block_m1=bm, block_n1=bn, num_warps=w, num_stages=st, split_dkdv=sp)
            config.set_config(d, bwd=c)
            try:
                ms = median_ms(lambda: ops.backward(do, q, k, v, o, lse, lay, d ** -0.5, True, parts=("dkdv",)),
                               reps=10)
            except Exception as e:
                print(f"dkdv D{d} {(bm, bn, w, st, rl)}: ERROR {e!r}"[:200], flush=True)
                continue
            print(f"dkdv D{d} {(bm, bn, w, st, rl)}: {ms:.3f} ms ({4 * fl / 2 / ms / 1e9:.0f} TF/s of its own 4 dots) "
                  f"regs/spills/smem {compiled_info(dkdv_kernel)}", flush=True)
        for bm, bn, w, st in ((128, 64, 8, 3),):
            c = replace(base, block_m2=bm, block_n2=bn, num_warps2=w, num_stages2=st)
            config.set_config(d, bwd=c)
            ms = median_ms(lambda: ops.backward(do, q, k, v, o, lse, lay, d ** -0.5, True, parts=("dq",)), reps=10)
            print(f"dq   D{d} {(bm, bn, w, st)}: {ms:.3f} ms ({3 * fl / 2 / ms / 1e9:.0f} TF/s of its own 3 dots) "
                  f"regs/spills/smem {compiled_info(dq_kernel)}", flush=True)
        config.set_config(d, bwd=base)


if __name__ == "__main__":
    main()
