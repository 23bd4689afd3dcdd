"""sglang attention bridge for HF transformers.

`register()` adds attn_implementation="triton": a forward whose bits equal sglang's deterministic Triton
extend-attention kernel (so training logprobs equal inference logprobs bit for bit: the in-tree kernel wherever a
first-use probe proved it bitwise equal to the installed sglang kernel, sglang's own kernel elsewhere) and our own
Triton FA2 backward. Under torch.compile the call is one custom op. `build_model_with_attn_bridge` is the drop-in for
upstream's actor loader.
`python -m sglang_attn_bridge.doctor` reports what was resolved and self-checks on a GPU.
Importing the package loads torch and triton; transformers is imported by `register()`.
"""

from __future__ import annotations

from .errors import BridgeUnsupported
from .loading import build_model_with_attn_bridge
from .registration import register

__version__ = "0.1.0"
__all__ = ["register", "build_model_with_attn_bridge", "BridgeUnsupported", "__version__"]
