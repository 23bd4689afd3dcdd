"""Gate probe: the attention function transformers holds for the bridge runs, forward and backward, and is right.

Through the bridge's public contract only: ``sglang_attn_bridge.register()``, then the function transformers'
``AttentionInterface`` holds under that name, called as transformers calls it (``fn(module, q, k, v, mask,
scaling=..., dropout=0.0, **kwargs)`` with [B, H, S, D] views in, [B, S, H, D] out). Two tiny cases, a causal GQA
batch and a packed batch whose sequences restart ``position_ids``, each compared (output and the gradients of q,
k and v) with a float64 torch reference. Without a GPU the kernels run in Triton's interpreter (fp32; seconds);
on a GPU, fp32 and bf16 on the GPU. Exit 0 only if every case holds; the last line says what failed.
Run by a command gate with the image's python; it uses the image's packages, not only the standard library.
"""

import os
import sys
import traceback
import warnings

if not os.environ.get("CUDA_VISIBLE_DEVICES") and not os.path.exists("/dev/kfd") and not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

# the interpreter computes masked scores with numpy, which warns about log(0) and 0/0 on rows it then discards
warnings.filterwarnings("ignore", category=RuntimeWarning)

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}  # relative error (norm) against float64


class Layer(torch.nn.Module):
    """What transformers passes as ``module``: a training attention layer that is causal."""

    is_causal = True

    def __init__(self):
        super().__init__()
        self.train()


def reference(q, k, v, scale, segments):
    """float64 causal attention per (start, end) segment; q [B, Hq, S, D], k/v [B, Hkv, S, D] -> [B, S, Hq, D]."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    outs = []
    for start, end in segments:
        qs, ks, vs = q[:, :, start:end], k[:, :, start:end], v[:, :, start:end]
        scores = (qs @ ks.transpose(-1, -2)) * scale
        causal = torch.ones(end - start, end - start, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        outs.append(torch.softmax(scores, dim=-1) @ vs)
    return torch.cat(outs, dim=2).transpose(1, 2)


def hf_views(x, heads):
    """[B, S, H*D] -> [B, H, S, D] as a transposed view, the way transformers' attention layers make them."""
    b, s, _ = x.shape
    return x.view(b, s, heads, -1).transpose(1, 2)


def run_case(fn, label, device, dtype, batch, lengths, hq=4, hkv=2, d=16, packed=False):
    gen = torch.Generator(device="cpu").manual_seed(len(label) * 7919)
    seq = sum(lengths)
    scale = d**-0.5
    q64, k64, v64, do64 = (
        torch.randn(batch, seq, h * d, generator=gen, dtype=torch.float64) for h in (hq, hkv, hkv, hq)
    )
    leaves = [x.to(device, dtype).requires_grad_() for x in (q64, k64, v64)]
    q, k, v = hf_views(leaves[0], hq), hf_views(leaves[1], hkv), hf_views(leaves[2], hkv)
    kwargs = {}
    if packed:
        kwargs["position_ids"] = torch.cat([torch.arange(n) for n in lengths])[None].to(device)
    out, weights = fn(Layer(), q, k, v, None, scaling=scale, dropout=0.0, **kwargs)
    if tuple(out.shape) != (batch, seq, hq, d):
        return "output shape %s, expected %s" % (tuple(out.shape), (batch, seq, hq, d))
    if weights is not None:
        return "returned attention weights, expected None"
    do = do64.view(batch, seq, hq, d).to(device, dtype)
    out.backward(do)

    refs = [x.detach().clone().requires_grad_() for x in (q64, k64, v64)]
    starts = [sum(lengths[:i]) for i in range(len(lengths))] if packed else [0]
    segments = [(s, s + n) for s, n in zip(starts, lengths)] if packed else [(0, seq)]
    want = reference(hf_views(refs[0], hq), hf_views(refs[1], hkv), hf_views(refs[2], hkv), scale, segments)
    want.backward(do64.view(batch, seq, hq, d))
    tol, worst = TOLERANCE[dtype], []
    for name, got, ref in (
        ("out", out, want),
        ("dq", leaves[0].grad, refs[0].grad),
        ("dk", leaves[1].grad, refs[1].grad),
        ("dv", leaves[2].grad, refs[2].grad),
    ):
        if got is None:
            return "%s is missing: autograd did not reach the inputs" % name
        got, ref = got.detach().double().cpu(), ref.detach()
        if not torch.isfinite(got).all():
            return "%s has non-finite values" % name
        err = ((got - ref).norm() / ref.norm()).item()
        if err > tol:
            return "%s relative error %.2e > %.0e against float64" % (name, err, tol)
        worst.append("%s %.1e" % (name, err))
    print("PASS %s %s %s: %s" % (label, device, str(dtype).replace("torch.", ""), ", ".join(worst)), flush=True)
    return None


def main() -> int:
    try:
        import sglang_attn_bridge
        from transformers import AttentionInterface

        name = sglang_attn_bridge.register()
        fn = AttentionInterface()[name]
    except Exception as exc:
        print("FAIL registering the bridge: %s: %s" % (type(exc).__name__, exc), flush=True)
        return 1
    if not getattr(fn, "__module__", "").startswith("sglang_attn_bridge"):
        print(
            "FAIL AttentionInterface[%r] is %s.%s, not the bridge's" % (name, fn.__module__, fn.__qualname__),
            flush=True,
        )
        return 1
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    dtypes = (torch.float32, torch.bfloat16) if gpu else (torch.float32,)
    cases = (
        ("causal GQA B2 S24 Hq4/Hkv2 D16", dict(batch=2, lengths=[24])),
        ("packed [1, 9+15] position_ids", dict(batch=1, lengths=[9, 15], packed=True)),
    )
    where = "GPU" if gpu else "CPU, Triton interpreter"
    for dtype in dtypes:
        for label, shape in cases:
            try:
                problem = run_case(fn, label, device, dtype, **shape)
            except Exception as exc:
                tb = traceback.extract_tb(exc.__traceback__)
                at = " at %s:%d" % (tb[-1].filename, tb[-1].lineno) if tb else ""  # type: ignore[str-format]  # a traceback frame has a line
                traceback.print_exc()
                problem = "raised %s: %s%s" % (type(exc).__name__, " ".join(str(exc).split())[:200], at)
            if problem:
                print("FAIL %s attention %s (%s, %s): %s" % (name, label, where, dtype, problem), flush=True)
                return 1
    print(
        "PASS %s attention through AttentionInterface, forward and backward, %d cases on the %s"
        % (name, len(cases) * len(dtypes), where)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
