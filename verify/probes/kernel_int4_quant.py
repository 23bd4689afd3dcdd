"""Gate probe: miles' ``fake_int4_quant_cuda`` quantizes as its CUDA source says, on the GPU.

For blocks (1, 32), (1, 128) and (32, 1), symmetric and asymmetric, fp32 and bf16 inputs drawn fresh, the kernel's
quantized values, scales and zero points are compared bit for bit with a Python reference of the same arithmetic
(fp32: scale = max(absmax * (1/7), 1e-5) or max((max - min) * (1/15), 1e-5), zero = clamp(-rint(min / scale), 0,
15), q = rint(x / scale) + zero), cast to the input's dtype as the kernel stores them. Exit 0 only if all hold.
"""

import torch
from kernel_common import device, exact, finish


def reference(x, block, sym):
    bm, bn = block
    m, n = x.shape
    blocks = x.float().reshape(m // bm, bm, n // bn, bn).permute(0, 2, 1, 3).reshape(m // bm, n // bn, bm * bn)
    if sym:
        scale = torch.clamp(blocks.abs().amax(-1) * torch.tensor(1.0 / 7.0, dtype=torch.float32), min=1e-5)
        zero = torch.zeros_like(scale)
        q = torch.round(blocks / scale[..., None])
    else:
        lo, hi = blocks.amin(-1), blocks.amax(-1)
        scale = torch.clamp((hi - lo) * torch.tensor(1.0 / 15.0, dtype=torch.float32), min=1e-5)
        zero = torch.clamp(-torch.round(lo / scale), 0.0, 15.0)
        q = torch.round(blocks / scale[..., None]) + zero[..., None]
    q = q.reshape(m // bm, n // bn, bm, bn).permute(0, 2, 1, 3).reshape(m, n)
    return q.to(x.dtype), scale.to(x.dtype), zero.to(x.dtype)


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    import fake_int4_quant_cuda

    n = 0
    for dtype in (torch.float32, torch.bfloat16):
        for block in ((1, 32), (1, 128), (32, 1)):
            for sym in (True, False):
                x = (torch.randn(256, 1024, device=dev) * 3).to(dtype)
                q, scale, zero = fake_int4_quant_cuda.fake_int4_quant_cuda(x, list(block), sym)
                rq, rscale, rzero = reference(x, block, sym)
                label = f"{str(dtype)[6:]} block={block} sym={sym}"
                exact(f"{label} q", q, rq)
                exact(f"{label} scale", scale, rscale)
                n += 2
                if not sym:
                    exact(f"{label} zero", zero, rzero)
                    n += 1
    return n


if __name__ == "__main__":
    finish(run(device()))
