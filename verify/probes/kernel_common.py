"""Shared checks of the kernel probes (kernel_*.py): a CUDA device or a clear failure, FlashAttention's tolerance rule.

The rule, as FlashAttention's own tests state it: a kernel is right when its largest error against an fp32 (or
fp64) reference is at most twice the largest error torch makes at the kernel's own precision, plus a small atol:
``max|kernel - ref| <= 2 * max|torch_same_precision - ref| + atol``. NaN never passes. Each probe imports torch
before its extension, as miles does (a torch extension links libc10 through torch's own load).
"""

import sys

import torch

FAILED: list = []


def device() -> torch.device:
    if not torch.cuda.is_available():
        print("FAILED: no CUDA device (a kernel probe runs only where a GPU is present)")
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch.device("cuda")


def rule(label: str, out, ref, same, atol: float) -> None:
    """Record one comparison under FlashAttention's rule (every tensor compared in fp64)."""
    out, ref, same = out.double(), ref.double(), same.double()
    err = (out - ref).abs().max().item()
    base = (same - ref).abs().max().item()
    ok = bool(torch.isfinite(out).all()) and err <= 2 * base + atol
    print(f"{'ok' if ok else 'FAIL'} {label}: max|kernel-ref|={err:.3e} <= 2*{base:.3e}+{atol:g}")
    if not ok:
        FAILED.append(label)


def exact(label: str, out, ref) -> None:
    """Record a comparison that must hold bit for bit (the same arithmetic in the same precision)."""
    diff = (out != ref).sum().item()
    print(f"{'ok' if diff == 0 else 'FAIL'} {label}: {diff} of {ref.numel()} elements differ")
    if diff:
        FAILED.append(label)


def forward_backward(fn, inputs, grad) -> tuple:
    """fn()'s output and the gradients of `inputs` for the upstream gradient `grad` (fresh gradients each call)."""
    for t in inputs:
        t.requires_grad_(True)
        t.grad = None
    out = fn()
    out.backward(grad.to(out.dtype))
    return (out.detach(), *(t.grad for t in inputs))


def check_forward_backward(label: str, kernel, upcast, same, inputs, grad, names, atols) -> int:
    """The kernel's output and input gradients against the fp32 reference `upcast` by the rule, with `same` (the
    reference at the inputs' own precision) as the baseline; returns the number of checks made."""
    got, ref, low = (forward_backward(fn, inputs, grad) for fn in (kernel, upcast, same))
    for i, name in enumerate(names):
        rule(f"{label} {name}", got[i], ref[i], low[i], atols[i])
    return len(names)


def attention(q, k, v, causal, upcast):
    """[B, S, H, D] reference attention (GQA by repeating K/V heads) in fp32 (upcast) or the inputs' precision."""
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bshd,bthd->bhst", q, k) / q.shape[-1] ** 0.5
    if causal:
        s, t = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(s, t, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.einsum("bhst,bthd->bshd", scores.softmax(-1).to(v.dtype), v)


def check_attention(fn, head_dims, dev) -> int:
    """An attention kernel `fn(q, k, v, causal)` ([B, S, H, D], bf16) against attention(): MHA and GQA, causal and
    not, output and dq/dk/dv; returns the number of checks made."""
    n = 0
    for d in head_dims:
        for hq, hk in ((8, 8), (8, 2)):
            for causal in (False, True):
                q, k, v = (torch.randn(2, 512, h, d, device=dev, dtype=torch.bfloat16) for h in (hq, hk, hk))
                g = torch.randn(2, 512, hq, d, device=dev, dtype=torch.bfloat16)
                n += check_forward_backward(
                    f"d{d} h{hq}/{hk} causal={causal}",
                    lambda: fn(q, k, v, causal),
                    lambda: attention(q, k, v, causal, True),
                    lambda: attention(q, k, v, causal, False),
                    (q, k, v),
                    g,
                    ("out", "dq", "dk", "dv"),
                    (1e-3, 2e-3, 2e-3, 2e-3),
                )
    return n


def finish(cases: int) -> None:
    if FAILED:
        print(f"FAILED: {len(FAILED)} of {cases} checks: {', '.join(FAILED)}")
        sys.exit(1)
    print(f"ok: {cases} checks on {torch.cuda.get_device_name()}")
