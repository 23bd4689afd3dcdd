"""Public registration with transformers: the attention function and its mask function under one name."""

from __future__ import annotations

from .errors import BridgeConfigError
from .hf_attention import triton_attention_forward
from .mask import triton_mask

DEFAULT_NAME = "triton"


def register(name: str = DEFAULT_NAME) -> str:
    """Register the bridge globally (class-level mappings, seen by every interface instance). Idempotent.

    Names containing "flash" or of the form a/b take special paths in transformers; "triton" avoids both.
    """
    if "flash" in name or "/" in name:
        raise BridgeConfigError(
            f"attention name {name!r}: names with 'flash' or '/' take special paths in transformers"
        )
    from transformers import AttentionInterface

    try:
        from transformers import AttentionMaskInterface
    except ImportError:  # older 4.5x exports it only from masking_utils
        from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(name, triton_attention_forward)
    AttentionMaskInterface.register(name, triton_mask)
    return name
