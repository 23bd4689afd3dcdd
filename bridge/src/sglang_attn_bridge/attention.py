"""The transformers attention function: HF layouts in and out, every input either honoured or refused.

Contract (transformers 4.5x/5.x): fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs)
with query [B, Hq, S, D] and key/value [B, Hkv, S, D] views, returning ([B, S, Hq, D], None). GQA is handled inside
the kernels (no K/V expansion). Sequences come from the padding mask, cu_seq_lens kwargs or position_ids (layout.py).
"""

from __future__ import annotations

import logging

import torch

from . import compiled, layout
from .errors import BridgeUnsupported
from .function import attention

logger = logging.getLogger(__name__)
_SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_REFUSED_KWARGS = {
    "s_aux": "attention sinks",
    "sinks": "attention sinks",
    "position_bias": "additive position bias",
    "head_mask": "head masks",
}
_warned = set()


def _refuse(what: str):
    raise BridgeUnsupported(f"attn_implementation='triton' does not support {what}; use 'eager' or 'sdpa' for it")


def triton_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    training = getattr(module, "training", torch.is_grad_enabled())
    if dropout and training:
        _refuse(f"attention dropout during training (dropout={dropout})")
    for name, what in _REFUSED_KWARGS.items():
        if kwargs.get(name) is not None:
            _refuse(what)
    if kwargs.get("output_attentions") and "output_attentions" not in _warned:
        _warned.add("output_attentions")
        logger.warning("attn_implementation='triton' does not return attention weights (returns None)")
    config = getattr(module, "config", None)
    if getattr(config, "attention_chunk_size", None):
        _refuse("chunked attention (config.attention_chunk_size)")

    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise BridgeUnsupported(
            f"expected [B, H, S, D] query/key/value, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    batch, hq, seq_q, head_dim = query.shape
    hkv, seq_k = key.shape[1], key.shape[2]
    if value.shape[-1] != head_dim or key.shape[-1] != head_dim:
        _refuse(f"different query/key/value head dims ({head_dim}, {key.shape[-1]}, {value.shape[-1]})")
    if head_dim > 256:
        _refuse(f"head_dim {head_dim} (at most 256)")
    if hq % hkv:
        _refuse(f"{hq} query heads over {hkv} key/value heads (must divide)")
    if query.dtype not in _SUPPORTED_DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        _refuse(f"dtypes {query.dtype}/{key.dtype}/{value.dtype} (fp16, bf16 or fp32, all the same)")
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
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    seqs = dict(
        attention_mask=attention_mask,
        position_ids=kwargs.get("position_ids"),
        cu_seq_lens_q=kwargs.get("cu_seq_lens_q"),
        cu_seq_lens_k=kwargs.get("cu_seq_lens_k"),
        max_length_q=kwargs.get("max_length_q"),
        max_length_k=kwargs.get("max_length_k"),
    )
    if torch.compiler.is_compiling():  # one opaque op: the layout is built inside it, where lengths may be read
        return compiled.attention(q, k, v, scale, bool(is_causal), window, softcap, **seqs), None
    lay = layout.build(batch, seq_q, seq_k, query.device, **seqs)
    return attention(q, k, v, lay, scale, causal=bool(is_causal), window=window, softcap=softcap), None
