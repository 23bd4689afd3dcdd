"""sglang attention bridge for HF transformers.

`register()` adds attn_implementation="triton": a forward whose bits equal sglang's deterministic Triton
extend-attention kernel (so training logprobs equal inference logprobs bit for bit: the in-tree kernel wherever a
first-use probe proved it bitwise equal to the installed sglang kernel, sglang's own kernel elsewhere) and our own
Triton FA2 backward. `attention_varlen` is the same call in FlashAttention 3's varlen form. Both are one custom op, so
under torch.compile the call is one opaque node. `build_model_with_attn_bridge` is the drop-in for upstream's actor
loader. Behaviour switches are `settings` (read from the environment once; `settings.override(...)` changes them).
`python -m sglang_attn_bridge.doctor` reports what was resolved and self-checks on a GPU.
Importing the package loads torch and triton; transformers is imported by `register()`.
"""

from __future__ import annotations

from . import settings
from ._version import __version__
from .errors import BridgeConfigError, BridgeError, BridgeUnsupported, SglangKernelError
from .loading import build_model_with_attn_bridge
from .registration import register
from .varlen_attention import attention_varlen

__all__ = [
    "register",
    "build_model_with_attn_bridge",
    "attention_varlen",
    "settings",
    "BridgeError",
    "BridgeUnsupported",
    "BridgeConfigError",
    "SglangKernelError",
    "__version__",
]
