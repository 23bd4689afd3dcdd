"""`attention_varlen`: the bridge without transformers, in FlashAttention 3's varlen form.

The same custom op as the transformers attention function (custom_op.py), so the same forward selection, kernels,
bits and autograd, eager or under torch.compile.
"""

from __future__ import annotations

import torch

from . import custom_op
from .errors import BridgeUnsupported
from .validate import check_qkv


def _sglang_window(window, causal: bool):
    """FA's window (left, right), or its left alone, as sglang's one-sided window (query i sees key j iff
    i - j <= left), None for none. The kernels' windows are what sglang computes: causal (right 0) or symmetric."""
    if window is None:
        return None
    left, right = (window, 0 if causal else window) if isinstance(window, int) else tuple(window)
    if left < 0 and right < 0:
        return None
    if left < 0 or right != (0 if causal else left):
        need = "(left, 0) with causal=True" if causal else "(w, w) with causal=False"
        raise BridgeUnsupported(f"window={window!r}: the bridge computes sglang's windows, {need}, or -1 for none")
    return int(left)


def attention_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    causal: bool = True,
    window=None,
    softcap: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """Packed q [Tq, Hq, D], k/v [Tk, Hkv, D] (Hq a multiple of Hkv; no K/V expansion needed) with int32 cumulative
    sequence lengths -> o [Tq, Hq, D] in q's dtype. Causal masks align bottom-right (a sequence with more keys than
    queries has a cached prefix, as in sglang). `window`: FA's (left, right) or its left alone, query i seeing key j
    iff i - j <= left (and j - i <= left when not causal); None or -1 for none. `softcap`: cap * tanh(s / cap), 0
    for none. `scale` defaults to D**-0.5. Gradients flow to q, k and v."""
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise BridgeUnsupported(
            f"attention_varlen takes packed [T, H, D] q/k/v, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    check_qkv(q, k, v, head_axis=1)
    if cu_seqlens_q.dim() != 1 or cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise BridgeUnsupported("cu_seqlens_q and cu_seqlens_k must be 1D and describe the same number of sequences")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    o = custom_op.attention(
        q[None],
        k[None],
        v[None],
        scale,
        bool(causal),
        _sglang_window(window, bool(causal)),
        float(softcap or 0.0),
        cu_seq_lens_q=cu_seqlens_q,
        cu_seq_lens_k=cu_seqlens_k,
        max_length_q=max_seqlen_q,
        max_length_k=max_seqlen_k,
    )
    return o[0]
