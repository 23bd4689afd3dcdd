"""The autograd function: sglang's (or our) forward, our Triton backward.

Works on [B, S, H, D] views. Under SGLANG_ATTN_BRIDGE_FORWARD=auto with sglang installed, the in-tree forward runs
for every configuration class where the probe (probe.py) found it bitwise equal to sglang's kernel on this device,
and sglang's kernel for the rest. With sglang's kernel, the output comes from it (bitwise what inference computes)
and, only when gradients are needed, our forward kernel in log-sum-exp-only mode supplies the LSE that sglang's
kernel does not return. With the in-tree forward, output and LSE come from one launch.
"""

from __future__ import annotations

import os

import torch

from . import ops, probe
from .errors import BridgeUnsupported
from .layout import Varlen
from .sglang_kernel import SglangKernel, resolve

FORWARD_ENV = "SGLANG_ATTN_BRIDGE_FORWARD"  # auto (default) | sglang | triton


def select_forward(q=None, k=None, v=None, causal=True, window=None, softcap=0.0) -> SglangKernel | None:
    """sglang's kernel, or None for the in-tree one. Forced by FORWARD_ENV; under auto the in-tree one where sglang
    is absent, or where the probe proved it bitwise equal for this call's class (given the call's q/k/v; without
    them, sglang's kernel). An installed-but-broken sglang is an error, not a silent switch (training logprobs
    would stop matching inference)."""
    mode = os.environ.get(FORWARD_ENV, "auto").strip().lower()
    if mode == "triton":
        return None
    if mode not in ("auto", "sglang"):
        raise BridgeUnsupported(f"{FORWARD_ENV}={mode!r}: expected auto, sglang or triton")
    res = resolve()
    if res.kernel is None:
        if mode == "sglang" or res.installed:
            raise RuntimeError(
                f"sglang's {'' if res.installed else 'kernel is required but '}"
                f"extend_attention_fwd_unified cannot be used: {res.reason}. "
                f"Set {FORWARD_ENV}=triton to use the in-tree forward."
            )
        return None
    if mode == "sglang" or q is None:
        return res.kernel
    cls = probe.class_of(q, k, v, causal, window, softcap)
    return None if probe.decide(res.kernel, cls, q.device).in_tree else res.kernel


def sglang_forward(kernel: SglangKernel, q, k, v, lay: Varlen, scale, causal, window, softcap):
    """Run sglang's kernel on packed [T, H, D] copies (views when the batch is one row covering all tokens)."""
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


def forward_impl(q, k, v, lay: Varlen, scale, causal, window, softcap, need_lse: bool):
    """(o, lse or None): the forward the selection picks for this call's class."""
    kernel = select_forward(q, k, v, causal, window, softcap)
    if kernel is None:
        return ops.forward(q, k, v, lay, scale, causal, window, softcap)
    o = sglang_forward(kernel, q, k, v, lay, scale, causal, window, softcap)
    lse = ops.forward(q, k, v, lay, scale, causal, window, softcap, compute_o=False)[1] if need_lse else None
    return o, lse


class BridgeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, lay: Varlen, scale: float, causal: bool, window, softcap):
        need_grad = any(ctx.needs_input_grad[:3])
        o, lse = forward_impl(q, k, v, lay, scale, causal, window, softcap, need_grad)
        if need_grad:
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.args = (lay, scale, causal, window, softcap)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = ops.backward(do, q, k, v, o, lse, *ctx.args)
        return dq, dk, dv, None, None, None, None, None


def attention(q, k, v, lay: Varlen, scale: float, causal: bool = True, window=None, softcap=None):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] -> o [B, Sq, Hq, D]. window in sglang's convention (i - j <= window)."""
    return BridgeAttention.apply(q, k, v, lay, float(scale), bool(causal), window, float(softcap or 0.0))
