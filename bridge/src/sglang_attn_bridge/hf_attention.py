"""The transformers attention function: HF layouts in and out, every input either honoured or refused.

Contract (transformers 4.5x/5.x): fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs)
with query [B, Hq, S, D] and key/value [B, Hkv, S, D] views, returning ([B, S, Hq, D], None). GQA is handled inside
the kernels (no K/V expansion). Sequences come from the padding mask, cu_seq_lens kwargs or position_ids (layout.py).
"""

from __future__ import annotations

import torch

from . import custom_op
from .errors import BridgeUnsupported, warn_once
from .validate import check_qkv
from .validate import refuse as _refuse

_REFUSED_KWARGS = {
    "s_aux": "attention sinks",
    "sinks": "attention sinks",
    "position_bias": "additive position bias",
    "head_mask": "head masks",
}


def triton_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    training = getattr(module, "training", torch.is_grad_enabled())
    if dropout and training:
        _refuse(f"attention dropout during training (dropout={dropout})")
    for name, what in _REFUSED_KWARGS.items():
        if kwargs.get(name) is not None:
            _refuse(what)
    if kwargs.get("output_attentions"):
        warn_once("output_attentions", "attn_implementation='triton' does not return attention weights (returns None)")
    config = getattr(module, "config", None)
    if getattr(config, "attention_chunk_size", None):
        _refuse("chunked attention (config.attention_chunk_size)")

    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise BridgeUnsupported(
            f"expected [B, H, S, D] query/key/value, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    check_qkv(query, key, value, head_axis=1)
    head_dim, seq_q, seq_k = query.shape[-1], query.shape[2], key.shape[2]
    if seq_q > seq_k:
        _refuse(f"more queries ({seq_q}) than keys ({seq_k})")

    is_causal = kwargs.get("is_causal")
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    window = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
    if window is not None:
        window = int(window)
        if window < 2:
            _refuse(f"sliding_window={window} (needs >= 2)")
    softcap = kwargs.get("softcap")
    if softcap is not None and softcap <= 0:
        softcap = None
    scale = head_dim**-0.5 if scaling is None else float(scaling)

    window = None if window is None else window - 1  # sglang's convention from here on
    seqs = dict(
        attention_mask=attention_mask,
        position_ids=kwargs.get("position_ids"),
        cu_seq_lens_q=kwargs.get("cu_seq_lens_q"),
        cu_seq_lens_k=kwargs.get("cu_seq_lens_k"),
        max_length_q=kwargs.get("max_length_q"),
        max_length_k=kwargs.get("max_length_k"),
    )
    # one custom op, eager or compiled: the layout is built inside it, where lengths may be read
    return custom_op.attention(
        query, key, value, scale, bool(is_causal), window, softcap, **seqs, heads_first=True
    ), None
