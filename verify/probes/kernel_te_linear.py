"""Gate probe: TransformerEngine's torch extension runs a ``te.Linear`` forward and backward on the GPU and equals
``torch.nn.functional.linear``.

The extension is the one the image compiled (transformer_engine_torch, loaded through ``transformer_engine.pytorch``
with the core library of the transformer-engine-cuNN wheel). bf16 and fp32 inputs drawn fresh, with and without
bias; output and the gradients of input, weight and bias against an fp64 reference by FlashAttention's rule
(kernel_common.py). The baseline is torch at the precision TransformerEngine computes in: bf16 for bf16, and
TensorFloat-32 for fp32 (TE's GEMMs take fp32 inputs as TF32: against a strict fp32 baseline they miss by 1.5e-3
on the output, as TF32's 10-bit mantissa does). Exit 0 if all hold.
"""

import torch
import torch.nn.functional as F
from kernel_common import check_forward_backward, device, finish


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as Megatron imports TransformerEngine
    import transformer_engine.pytorch as te

    n = 0
    for dtype in (torch.bfloat16, torch.float32):
        torch.backends.cuda.matmul.allow_tf32 = dtype == torch.float32  # torch's fp32 baseline as TE computes it
        for bias in (True, False):
            layer = te.Linear(1024, 768, bias=bias, params_dtype=dtype, device=dev)
            x = torch.randn(4, 256, 1024, device=dev, dtype=dtype)
            g = torch.randn(4, 256, 768, device=dev, dtype=dtype)
            params = (layer.weight, layer.bias) if bias else (layer.weight,)
            with torch.no_grad():
                for p in params:
                    p.copy_(torch.randn_like(p) / 32)

            def reference(upcast: bool):
                cast = (lambda t: t.double()) if upcast else (lambda t: t)
                return F.linear(cast(x), cast(layer.weight), cast(layer.bias) if bias else None)

            tol = 1e-3 if dtype == torch.float32 else 1e-2
            names = ("out", "dx", "dw", "db")[: 2 + len(params)]
            n += check_forward_backward(
                f"{str(dtype)[6:]} bias={bias}",
                lambda: layer(x),
                lambda: reference(True),
                lambda: reference(False),
                (x, *params),
                g,
                names,
                (tol,) * len(names),
            )
    torch.backends.cuda.matmul.allow_tf32 = False
    return n


if __name__ == "__main__":
    finish(run(device()))
