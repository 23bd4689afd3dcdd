"""sglang attention bridge for HF transformers.

`register()` adds attn_implementation="triton": sglang's deterministic Triton extend-attention kernel in the forward
(so training logprobs equal inference logprobs bit for bit; an in-tree kernel with the same arithmetic when sglang is
absent) and our own Triton FA2 backward. `build_model_with_attn_bridge` is the drop-in for upstream's actor loader.
`python -m sglang_attn_bridge.doctor` reports what was resolved and self-checks on a GPU.
Importing the package loads torch and triton; transformers is imported by `register()`.
"""

from __future__ import annotations

from .errors import BridgeUnsupported
from .loading import build_model_with_attn_bridge
from .registration import register

__version__ = "0.1.0"
__all__ = ["register", "build_model_with_attn_bridge", "BridgeUnsupported", "__version__"]
