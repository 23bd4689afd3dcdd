"""The mask function registered next to the attention function.

transformers builds no mask at all for an attention name without a registered mask function, which silently drops
padding and packed-sequence boundaries. Ours returns what the kernels can use — the 2D padding mask, sliced to the key
length — like transformers' flash-attention mask; packed sequences and windows reach the attention function as
kwargs. Mask patterns that a 2D mask cannot express (custom and/or overlays, which transformers marks with
use_vmap=True) are refused here rather than ignored.
"""

from __future__ import annotations

from .errors import BridgeUnsupported


def triton_mask(batch_size=None, *args, attention_mask=None, kv_length=None, use_vmap=False, **kwargs):
    if use_vmap:
        raise BridgeUnsupported(
            "attn_implementation='triton' cannot apply custom mask overlays (or_mask_function/and_mask_function); "
            "use 'sdpa' or 'eager' for this model"
        )
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        return attention_mask  # a ready 4D mask: the attention function refuses it with a clear message
    if kv_length is not None:
        attention_mask = attention_mask[:, -kv_length:]
    return attention_mask
