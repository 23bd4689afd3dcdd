"""Gate probe: mamba-ssm's ``selective_scan_cuda`` (through ``selective_scan_fn``) equals a float64 scan, forward and
backward, on the GPU.

fp32, bf16 and fp16 inputs drawn fresh as mamba-ssm's own tests draw them (softplus on, D, z and delta_bias given,
input-dependent B/C), L = 512 and 4096 (two of the kernel's 2048-long chunks, the state carried across), and fp32
with grouped B/C; output, last state and the gradients of u, delta, A, B, C, D, z and delta_bias against a float64
scan written here (mamba-ssm's ``selective_scan_ref`` computes in float32) by FlashAttention's rule
(kernel_common.py), torch's own error being ``selective_scan_ref``'s at the inputs' dtype. atol is a floor scaled to
the tensor: 1e-4 * max|ref| for fp32 inputs (the kernel is built with --use_fast_math and sums in another order),
one ulp of bf16/fp16 at max|ref| otherwise (outputs and gradients are rounded to it). Each kernel call follows a
NaN-filled block freed to torch's allocator, so an element it never writes likely reads NaN. Exit 0 if all hold.
"""

import torch
import torch.nn.functional as F
from kernel_common import device, finish, rule

ATOL = {torch.float32: 1e-4, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}  # times max|ref|
NAMES = ("out", "last_state", "du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias")


def reference(u, delta, A, B, C, D, z, delta_bias):
    """x_t = exp(dt*A) x_{t-1} + dt*B_t*u_t, y_t = C_t.x_t + D*u_t, out = y*silu(z), dt = softplus(delta + bias)."""
    dt = F.softplus(delta + delta_bias[:, None])  # (b, d, l)
    if B.dim() == 4:  # grouped (b, g, n, l) -> (b, d, n, l)
        B, C = (t.repeat_interleave(u.shape[1] // t.shape[1], dim=1) for t in (B, C))
    else:  # (b, n, l) -> (b, 1, n, l)
        B, C = B[:, None], C[:, None]
    dA = torch.exp(dt[:, :, None, :] * A[None, :, :, None])  # (b, d, n, l)
    dBu = dt[:, :, None, :] * B * u[:, :, None, :]
    x = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for i in range(u.shape[2]):
        x = dA[..., i] * x + dBu[..., i]
        ys.append((x * C[..., i]).sum(-1))
    return (torch.stack(ys, dim=2) + u * D[:, None]) * F.silu(z), x


def outputs(fn, inputs, grad) -> list:
    """fn()'s output and last state, and the gradients of `inputs` for the upstream gradient `grad`."""
    for t in inputs:
        t.grad = None
    out, last = fn()
    out.backward(grad.to(out.dtype))
    return [out.detach(), last.detach(), *(t.grad for t in inputs)]


def case(dev, dtype, L, groups) -> int:
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn, selective_scan_ref

    b, d, n = 2, 64, 16
    bc = (b, n, L) if groups is None else (b, groups, n, L)
    u, z, g = (torch.randn(b, d, L, device=dev, dtype=dtype) for _ in range(3))
    delta = (0.5 * torch.rand(b, d, L, device=dev)).to(dtype)
    B, C = (torch.randn(*bc, device=dev, dtype=dtype) for _ in range(2))
    A, D, delta_bias = -0.5 * torch.rand(d, n, device=dev), torch.randn(d, device=dev), 0.5 * torch.rand(d, device=dev)
    inputs = tuple(t.requires_grad_(True) for t in (u, delta, A, B, C, D, z, delta_bias))
    wide = tuple(t.detach().double().requires_grad_(True) for t in inputs)  # its gradients stay in float64
    kw = dict(delta_softplus=True, return_last_state=True)

    def kernel():
        torch.full((64 << 20,), float("nan"), device=dev)  # 256 MiB of NaN, back to the allocator at once
        return selective_scan_fn(*inputs, **kw)

    got = outputs(kernel, inputs, g)
    ref = outputs(lambda: reference(*wide), wide, g)
    same = outputs(lambda: selective_scan_ref(*inputs, **kw), inputs, g)
    label = f"{str(dtype)[6:]} L={L} B/C={'(b,n,l)' if groups is None else f'(b,{groups},n,l)'}"
    for name, k, r, s in zip(NAMES, got, ref, same):
        rule(f"{label} {name}", k, r, s, ATOL[dtype] * r.abs().max().item())
    return len(NAMES)


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    import selective_scan_cuda  # noqa: F401  (the extension selective_scan_fn calls: its load fails here, first)

    n = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for L in (512, 4096):
            n += case(dev, dtype, L, None)
    return n + case(dev, torch.float32, 1024, 2)


if __name__ == "__main__":
    finish(run(device()))
