"""Gate probe: ``fast_hadamard_transform`` equals a product with the Sylvester Hadamard matrix, on the GPU.

fp32 and bf16 inputs drawn fresh, sizes 128 to 8192 (and a size the kernel pads), scaled by 1/sqrt(n); against
the fp64 matrix product by FlashAttention's rule (kernel_common.py). Exit 0 only if every check holds.
"""

import math

import torch
from kernel_common import device, finish, rule


def hadamard(n, dev):
    h = torch.ones(1, 1, dtype=torch.float64, device=dev)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    from fast_hadamard_transform import hadamard_transform

    n = 0
    for dtype in (torch.float32, torch.bfloat16):
        for size in (128, 1024, 8192, 1000):
            x = torch.randn(64, size, device=dev, dtype=dtype)
            full = 1 << max(size - 1, 1).bit_length()
            scale = 1 / math.sqrt(full)
            h = hadamard(full, dev)
            pad = torch.nn.functional.pad(x.double(), (0, full - size))
            ref = (pad @ h.T * scale)[:, :size]
            same = (torch.nn.functional.pad(x, (0, full - size)) @ h.T.to(dtype) * scale)[:, :size]
            rule(
                f"{str(dtype)[6:]} n={size}",
                hadamard_transform(x, scale),
                ref,
                same,
                1e-5 if dtype == torch.float32 else 1e-2,
            )
            n += 1
    return n


if __name__ == "__main__":
    finish(run(device()))
