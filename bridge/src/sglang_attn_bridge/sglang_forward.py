"""Run sglang's kernel on the bridge's [B, S, H, D] views: the forward whose bits are inference's."""

from __future__ import annotations

import torch

from .layout import Varlen
from .sglang_kernel import SglangKernel


def sglang_forward(kernel: SglangKernel, q, k, v, lay: Varlen, scale, causal, window, softcap):
    """sglang's output for q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D], on packed [T, H, D] copies (views when the batch is
    one row covering all tokens). `window` in sglang's convention (i - j <= window), None for none."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    cu_q, cu_k = lay.cu_seqlens()
    o = (torch.empty if lay.covers_all else torch.zeros)((B, Sq, Hq, D), device=q.device, dtype=q.dtype)
    one_row = B == 1 and lay.covers_all and all(t.stride(-1) == 1 for t in (q, k, v))
    if one_row:
        qp, kp, vp, op = q[0], k[0], v[0], o[0]
    else:
        qi, ki = lay.token_index(Sq, "q"), lay.token_index(Sk, "k")
        qp = q.reshape(B * Sq, Hq, D).index_select(0, qi)
        kp = k.reshape(B * Sk, Hkv, D).index_select(0, ki)
        vp = v.reshape(B * Sk, Hkv, D).index_select(0, ki)
        op = torch.empty_like(qp)
    kv_indices = torch.arange(kp.shape[0], device=q.device, dtype=torch.int64)
    prefix = (lay.len_k - lay.len_q).to(torch.int32)
    kernel.call(
        qp,
        op,
        kp,
        vp,
        cu_q,
        cu_k,
        kv_indices,
        prefix,
        lay.max_q,
        scale,
        causal=causal,
        sliding_window_size=-1 if window is None else window,
        logit_cap=softcap or 0.0,
    )
    if not one_row:
        o.view(B * Sq, Hq, D).index_copy_(0, qi, op)
    return o
