"""Shared pieces of the GPU scripts: shapes, random inputs, FLOP counts, device-event timing."""

from __future__ import annotations

import glob
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_sglang():
    """sglang's kernel module from the carried wheel (.whl/sglang-*.whl), or None."""
    wheels = sorted(glob.glob(os.path.join(HERE, "..", "..", ".whl", "sglang-*.whl")))
    if not wheels:
        return None
    sys.path.insert(0, HERE)
    from sglang_loader import load

    return load(wheels[-1])


def packed_lengths(total: int, n: int, seed: int = 0) -> list[int]:
    """n mixed lengths (multiples of 16... not required) summing to total."""
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(n, generator=g) + 0.25
    lens = (w / w.sum() * total).floor().long()
    lens[-1] += total - lens.sum()
    return lens.tolist()


def make_qkv(lens, hq, hkv, d, dtype, device="cuda", requires_grad=False):
    """Packed row [1, T, H, D] tensors and the cu_seqlens."""
    t = sum(lens)
    q = torch.randn(1, t, hq, d, device=device, dtype=dtype)
    k = torch.randn(1, t, hkv, d, device=device, dtype=dtype)
    v = torch.randn(1, t, hkv, d, device=device, dtype=dtype)
    for x in (q, k, v):
        x.requires_grad_(requires_grad)
    cu = torch.tensor([0] + list(lens), device=device).cumsum(0).to(torch.int32)
    return q, k, v, cu


def causal_flops(lens, hq, d) -> float:
    return float(sum(2 * s * s * hq * d for s in lens))


def median_ms(fn, reps: int = 30, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
