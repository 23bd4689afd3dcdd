"""One launch of each bridge kernel at the bench's 32/8 D128 1x8192 shape, for Nsight Compute to look inside.

The bench says how fast; this says why (tensor-pipe utilisation, warp stall reasons, occupancy). Run on a GPU
machine whose runtime lets ncu read the counters (Firecracker; not gVisor), with the clocks left alone:
  ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section ComputeWorkloadAnalysis python3 bridge/bench/profile_kernels.py
Kernels compile and warm up outside the profiled range.
"""

from __future__ import annotations

import torch
from common import make_qkv
from sglang_attn_bridge import kernel_launches, layout
from sglang_attn_bridge.scoring import Scoring


def main() -> None:
    lens, hq, hkv, d = [8192], 32, 8, 128
    q, k, v, cu = make_qkv(lens, hq, hkv, d, torch.bfloat16)
    lay = layout.from_cu_seqlens(cu, cu, lens[0], lens[0])

    do = torch.randn_like(q)

    def step():
        o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
        return kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, True))

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
