"""Rehearsal probe: mamba-ssm's ``selective_scan_cuda`` (through ``selective_scan_fn``) against a float64 scan.

Fresh random inputs for every case, drawn as mamba-ssm's own selective-scan tests draw them (A = -0.5*rand, delta =
0.5*rand, delta_bias = 0.5*rand, softplus on, B/C input-dependent, D and z given). Forward output, last state and
the gradients of u, delta, A, B, C, D, z and delta_bias, compared with a float64 pure-torch scan (written here:
``selective_scan_ref`` casts to float32 internally) by FlashAttention's rule of kernel_common.py,
``max|kernel - ref64| <= 2 * max|torch_same - ref64| + atol``, where ``torch_same`` is mamba-ssm's own
``selective_scan_ref`` at the inputs' dtype (float32 arithmetic inside, as the kernel) and atol is a scale-aware
floor: 1e-4 * max|ref64| for float32 inputs (the kernel is built with --use_fast_math and sums in another order),
one ulp of the dtype at max|ref64| for bf16/fp16 inputs (outputs and gradients are rounded to it). Also printed:
max|kernel - ref64|, the same relative to max|ref64|, and ||kernel - ref64|| / ||ref64||. NaN never passes. Each
kernel call is preceded by freeing a NaN-filled block to torch's caching allocator, so that an output element
the kernel never writes reads NaN (best effort: the allocator may place outputs elsewhere). Exit 0 if all hold.
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "verify" / "probes"))
from kernel_common import FAILED, device, finish  # noqa: E402

EPS = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}
ROWS = []
NAMES = ("out", "last_state", "du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias")


def ref64(u, delta, A, B, C, D, z, delta_bias):
    """The selective scan in float64: x_t = exp(dt*A) x_{t-1} + dt*B_t*u_t, y_t = C_t.x_t + D*u_t, out = y*silu(z)."""
    u, delta, A, B, C, D, z, delta_bias = (t.double() for t in (u, delta, A, B, C, D, z, delta_bias))
    dt = F.softplus(delta + delta_bias[:, None])  # (b, d, l)
    if B.dim() == 4:  # (b, g, n, l) -> (b, d, n, l)
        B = B.repeat_interleave(u.shape[1] // B.shape[1], dim=1)
        C = C.repeat_interleave(u.shape[1] // C.shape[1], dim=1)
    else:  # (b, n, l) -> (b, 1, n, l)
        B, C = B[:, None], C[:, None]
    dA = torch.exp(dt[:, :, None, :] * A[None, :, :, None])  # (b, d, n, l)
    dBu = dt[:, :, None, :] * B * u[:, :, None, :]
    x = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for i in range(u.shape[2]):
        x = dA[..., i] * x + dBu[..., i]
        ys.append((x * C[..., i]).sum(-1))
    y = torch.stack(ys, dim=2) + u * D[:, None]
    return y * F.silu(z), x


def grads(fn, inputs, g):
    for t in inputs:
        t.grad = None
    out, last = fn()
    out.backward(g.to(out.dtype))
    return [out.detach(), last.detach()] + [t.grad.detach().clone() for t in inputs]


def poison(dev):
    block = torch.full((64 << 20,), float("nan"), device=dev)  # 256 MiB, back to the cache at once
    del block


def case(dev, itype, L, groups, names=NAMES):
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn, selective_scan_ref

    b, d, n = 2, 64, 16
    u = torch.randn(b, d, L, device=dev, dtype=itype)
    delta = (0.5 * torch.rand(b, d, L, device=dev)).to(itype)
    A = -0.5 * torch.rand(d, n, device=dev)
    shape = (b, n, L) if groups is None else (b, groups, n, L)
    B = torch.randn(*shape, device=dev, dtype=itype)
    C = torch.randn(*shape, device=dev, dtype=itype)
    D = torch.randn(d, device=dev)
    z = torch.randn(b, d, L, device=dev, dtype=itype)
    delta_bias = 0.5 * torch.rand(d, device=dev)
    g = torch.randn(b, d, L, device=dev, dtype=itype)
    inputs = (u, delta, A, B, C, D, z, delta_bias)
    for t in inputs:
        t.requires_grad_(True)
    kw = dict(delta_softplus=True, return_last_state=True)

    def kernel():
        poison(dev)
        return selective_scan_fn(u, delta, A, B, C, D, z, delta_bias, **kw)

    got = grads(kernel, inputs, g)
    torch.cuda.synchronize()
    ins64 = tuple(t.detach().double().requires_grad_(True) for t in inputs)  # gradients kept in float64
    ref = grads(lambda: ref64(*ins64), ins64, g)
    same = grads(lambda: selective_scan_ref(u, delta, A, B, C, D, z, delta_bias, **kw), inputs, g)
    label = f"{str(itype)[6:]} L={L} B/C={'(b,n,l)' if groups is None else f'(b,{groups},n,l)'}"
    for name, k, r, s in zip(names, got, ref, same):
        k, r, s = k.double(), r.double(), s.double()
        scale = r.abs().max().item()
        atol = (1e-4 if itype == torch.float32 else EPS[itype]) * scale
        err = (k - r).abs().max().item()
        base = (s - r).abs().max().item()
        rel = ((k - r).norm() / r.norm()).item()
        ok = bool(torch.isfinite(k).all()) and err <= 2 * base + atol
        print(
            f"{'ok' if ok else 'FAIL'} {label} {name}: max|kernel-ref64|={err:.3e} (max|ref64|={scale:.3e}, "
            f"rel {err / scale:.2e}, norm-rel {rel:.2e}) <= 2*{base:.3e}+{atol:.3e}",
            flush=True,
        )
        ROWS.append((label, name, err, scale, rel, base, atol, ok))
        if not ok:
            FAILED.append(f"{label} {name}")
    return len(names)


def main() -> None:
    t0 = time.monotonic()
    dev = device()
    import mamba_ssm  # both after torch, as miles imports a torch extension (mamba_ssm loads the other itself)
    import selective_scan_cuda

    print(f"import ok: selective_scan_cuda from {selective_scan_cuda.__file__}; mamba_ssm {mamba_ssm.__version__}")
    n = 0
    for itype in (torch.float32, torch.bfloat16, torch.float16):
        for L in (512, 4096):  # 4096: two of the kernel's 2048-long chunks, the state carried across
            n += case(dev, itype, L, None)
    n += case(dev, torch.float32, 1024, 2)  # grouped B/C, (b, g, n, l)
    print(f"{n} checks in {time.monotonic() - t0:.1f} s")
    finish(n)


if __name__ == "__main__":
    main()
