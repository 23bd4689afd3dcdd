"""Gate probe: ``causal_conv1d`` equals a causal depthwise conv1d in torch, forward and backward, on the GPU.

bf16 and fp32 inputs drawn fresh, widths 2 to 4, with and without SiLU; output and the gradients of x, weight and
bias against an fp32 ``F.conv1d`` reference by FlashAttention's rule (kernel_common.py). Exit 0 if all hold.
"""

import torch
import torch.nn.functional as F
from kernel_common import check_forward_backward, device, finish


def reference(x, w, b, act, upcast):
    if upcast:
        x, w, b = x.float(), w.float(), b.float()
    out = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., : x.shape[-1]]
    return F.silu(out) if act else out


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    from causal_conv1d import causal_conv1d_fn

    n = 0
    for dtype in (torch.bfloat16, torch.float32):
        for width in (2, 3, 4):
            for act in (None, "silu"):
                x = torch.randn(2, 256, 1024, device=dev, dtype=dtype)
                w = torch.randn(256, width, device=dev, dtype=dtype)
                b = torch.randn(256, device=dev, dtype=dtype)
                g = torch.randn(2, 256, 1024, device=dev, dtype=dtype)
                tol = 1e-3 if dtype == torch.float32 else 1e-2
                n += check_forward_backward(
                    f"{str(dtype)[6:]} width={width} act={act}",
                    lambda: causal_conv1d_fn(x, w, b, activation=act),
                    lambda: reference(x, w, b, act, True),
                    lambda: reference(x, w, b, act, False),
                    (x, w, b),
                    g,
                    ("out", "dx", "dw", "db"),
                    (tol,) * 4,
                )
    return n


if __name__ == "__main__":
    finish(run(device()))
