"""Plain PyTorch attention for one sequence: the yardstick for tests, the doctor and the GPU checks.

Deliberately simple (expands GQA, materialises the score matrix) and dtype-agnostic: call it on float64 or float32
copies to get a reference. Masks follow transformers' conventions: causal is aligned bottom-right when the query is
shorter than the keys (a cached prefix), and a sliding window W lets query position i see keys j with i - j < W.
"""

from __future__ import annotations

import torch


def reference_attention(q, k, v, scale, causal=True, window=None, softcap=None):
    """q [Hq, Sq, D], k/v [Hkv, Sk, D] -> [Hq, Sq, D] in q's dtype."""
    hq, sq, _ = q.shape
    hkv, sk, _ = k.shape
    k = k.repeat_interleave(hq // hkv, dim=0)
    v = v.repeat_interleave(hq // hkv, dim=0)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    qpos = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    kpos = torch.arange(sk, device=q.device)[None, :]
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        allowed &= kpos <= qpos
    if window:
        allowed &= (qpos - kpos) < window
        if not causal:
            allowed &= (kpos - qpos) < window
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def reference_varlen(q, k, v, cu_q, cu_k, scale, **mask):
    """Packed q [Tq, Hq, D], k/v [Tk, Hkv, D] with cumulative lengths -> [Tq, Hq, D]; one sequence at a time."""
    out = torch.empty_like(q)
    for b in range(len(cu_q) - 1):
        qs, qe, ks, ke = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if qe == qs:
            continue
        o = reference_attention(
            q[qs:qe].transpose(0, 1), k[ks:ke].transpose(0, 1), v[ks:ke].transpose(0, 1), scale, **mask
        )
        out[qs:qe] = o.transpose(0, 1)
    return out
