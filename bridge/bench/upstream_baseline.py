"""An upstream-style attention backward, as the bridge's speed yardstick (`upstream_bwd` in docs/bridge-h200.md).

What upstream's bridge did, rebuilt on our kernels so only the structure differs: GQA K/V expanded with repeat,
a Python loop over the sequences of a packed batch, the log-sum-exp recomputed instead of kept from the forward,
64x64 blocks, one pipeline stage, plain masked loads (no TMA) and one stream. It inherits our longest-first launch
order.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from sglang_attn_bridge import config, kernel_launches, layout
from sglang_attn_bridge.scoring import Scoring

UPSTREAM_BWD = config.BwdConfig(64, 64, 64, 64, 4, 1, overlap=False)


def upstream_backward(do, q, k, v, o, cu, scale):
    """q/o/do [1, T, Hq, D], k/v [1, T, Hkv, D], cu int32 -> dq, dk, dv (loop over sequences)."""
    group = q.shape[2] // k.shape[2]
    saved = dict(config.GPU_BWD), dict(config.GPU_FWD)
    for key in config.GPU_BWD:
        config.GPU_BWD[key] = UPSTREAM_BWD
        config.GPU_FWD[key] = replace(config.GPU_FWD[key], tma=False)
    try:
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        bounds = cu.tolist()
        for s, e in zip(bounds[:-1], bounds[1:]):
            n = e - s
            qs, os_, dos = q[:, s:e], o[:, s:e], do[:, s:e]
            ks = k[:, s:e].repeat_interleave(group, dim=2)
            vs = v[:, s:e].repeat_interleave(group, dim=2)
            lay = layout.dense(1, n, n, q.device)
            lse = kernel_launches.forward(qs, ks, vs, lay, Scoring.of(scale, True), compute_o=False)[1]
            gq, gk, gv = kernel_launches.backward(dos, qs, ks, vs, os_, lse, lay, Scoring.of(scale, True))
            dq[:, s:e] = gq
            dk[:, s:e] = gk.unflatten(2, (k.shape[2], group)).sum(3)
            dv[:, s:e] = gv.unflatten(2, (k.shape[2], group)).sum(3)
        return dq, dk, dv
    finally:
        config.GPU_BWD.update(saved[0])
        config.GPU_FWD.update(saved[1])
