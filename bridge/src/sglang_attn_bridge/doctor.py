"""`python -m sglang_attn_bridge.doctor`: what the bridge resolved, and a tiny self-check. Exit 1 on any problem.

Prints versions, the forward kernel (sglang's, with its API generation, or the in-tree one), the kernel plan for
representative shapes on this device (`kernel_plan.plan`: which kernels, tiles and streams, and why), checks that the
registration is visible to a fresh AttentionInterface, and on a GPU (or in the Triton interpreter) runs a small
packed GQA forward+backward against a float64 reference. Without a GPU the self-check is skipped unless
--require-gpu is given. --require-sglang makes a missing sglang kernel a problem (images that ship sglang).
"""

from __future__ import annotations

import argparse
import platform
import sys

# (label, query heads, KV heads, head dim, window): GQA and not at both tuned head dims, a window, a padded head dim
PLAN_SHAPES = (
    ("32/8 D128", 32, 8, 128, None),
    ("16/16 D128", 16, 16, 128, None),
    ("32/8 D64", 32, 8, 64, None),
    ("16/16 D64", 16, 16, 64, None),
    ("32/8 D128 window", 32, 8, 128, 4095),
    ("8/2 D80", 8, 2, 80, None),
)


def _line(status: str, what: str, detail: str = "") -> None:
    print(f"{status:4} {what:22} {detail}".rstrip())


def _kernel_plans(lse_only: bool) -> None:
    """The plan for each of PLAN_SHAPES (bf16) on the device a call would run on; `lse_only` when sglang's kernel is
    the forward, so ours only computes the LSE for the backward."""
    import torch

    from .config import interpreting
    from .kernel_plan import Target, plan

    if torch.cuda.is_available():
        device = torch.device("cuda")
        major, minor = torch.cuda.get_device_capability(device)
        where = f"{torch.cuda.get_device_name(device)} ({'gfx' if torch.version.hip else 'sm_'}{major}{minor})"
    elif interpreting():
        device, where = torch.device("cpu"), "the CPU, in the Triton interpreter"
    else:
        _line("INFO", "kernel plan", "no GPU: no kernel runs here (TRITON_INTERPRET=1 runs them on the CPU)")
        return
    target = Target.of(device)
    _line("INFO", "kernel plan", f"on {where}, bf16 calls" + (" (our forward: LSE only)" if lse_only else ""))
    for label, hq, hkv, d, window in PLAN_SHAPES:
        q = torch.empty(1, 64, hq, d, dtype=torch.bfloat16, device="meta")
        k = torch.empty(1, 64, hkv, d, dtype=torch.bfloat16, device="meta")
        p = plan(q, k, k, window, compute_o=not lse_only, target=target)
        _line("INFO", label, p.describe())
        _line("", "", "; ".join(p.why))


def _self_check(device: str) -> tuple[bool, str]:
    import torch

    from .reference import reference_attention
    from .varlen_attention import attention_varlen

    # bf16 on a GPU; fp16 in the interpreter (its bf16 dot is wrong)
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    gen = torch.Generator(device="cpu").manual_seed(1234)
    lens = [48, 80]
    t, hq, hkv, d = sum(lens), 4, 2, 64
    q, k, v = (torch.randn(t, h, d, generator=gen).to(device, dtype).requires_grad_() for h in (hq, hkv, hkv))
    cu = torch.tensor([0, 48, 128], dtype=torch.int32, device=device)
    o = attention_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=80, max_seqlen_k=80)
    do = torch.randn(o.shape, generator=gen).to(device, dtype)
    o.backward(do)
    qd, kd, vd = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    worst = 0.0
    outs = []
    for s, e in ((0, 48), (48, 128)):
        outs.append(
            reference_attention(
                qd[s:e].transpose(0, 1), kd[s:e].transpose(0, 1), vd[s:e].transpose(0, 1), d**-0.5
            ).transpose(0, 1)
        )
    ref = torch.cat(outs)
    ref.backward(do.double().cpu())
    for name, got, want in (("o", o, ref), ("dq", q.grad, qd.grad), ("dk", k.grad, kd.grad), ("dv", v.grad, vd.grad)):
        got = got.detach().double().cpu()
        if not torch.isfinite(got).all():
            return False, f"{name} has non-finite values"
        err = ((got - want.detach()).norm() / want.detach().norm()).item()
        worst = max(worst, err)
        if err > tol:
            return False, f"{name} relative error {err:.2e} > {tol:.0e}"
    return True, f"{device} {str(dtype).replace('torch.', '')} fwd+bwd, worst relative error {worst:.2e}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sglang_attn_bridge.doctor", description=__doc__.splitlines()[0])
    ap.add_argument("--require-gpu", action="store_true", help="a missing GPU is a problem")
    ap.add_argument("--require-sglang", action="store_true", help="a missing sglang kernel is a problem")
    args = ap.parse_args(argv)
    problems = 0

    import torch

    _line("INFO", "python", platform.python_version())
    hip = getattr(torch.version, "hip", None)
    _line("INFO", "torch", f"{torch.__version__} ({'hip ' + hip if hip else 'cuda ' + str(torch.version.cuda)})")
    try:
        import triton

        _line("INFO", "triton", triton.__version__)
        import transformers

        _line("INFO", "transformers", transformers.__version__)
    except Exception as e:
        _line("FAIL", "import", f"{type(e).__name__}: {e}")
        return 1

    from . import __version__, settings
    from .errors import BridgeError
    from .forward_selection import select_forward
    from .sglang_resolution import resolve, sglang_version

    try:
        current = settings.current()
    except BridgeError as e:
        _line("FAIL", "settings", str(e))
        return 1

    _line("INFO", "bridge", __version__)
    _line(
        "INFO",
        "settings",
        f"forward={current.forward} enable={current.enable} portable={current.portable} "
        f"interpreter={current.interpreter} probe_cache={current.probe_cache}",
    )
    res = resolve()
    _line("INFO", "sglang", sglang_version() or ("installed, version unknown" if res.installed else "not installed"))
    if res.kernel is not None:
        _line("PASS", "sglang kernel", f"{res.kernel.module}.extend_attention_fwd_unified, API {res.kernel.generation}")
    elif res.installed or args.require_sglang:
        _line("FAIL", "sglang kernel", res.reason)
        problems += 1
    else:
        _line("INFO", "sglang kernel", res.reason)
    kernel = None
    try:
        kernel = select_forward()
        _line(
            "PASS",
            "forward",
            f"sglang ({res.kernel.generation})"
            if kernel
            else f"in-tree (BLOCK_N 64, natural exp, fp32 acc; {settings.ENV['forward']}={current.forward})",
        )
    except BridgeError as e:
        _line("FAIL", "forward", str(e))
        problems += 1
    # which forward serves a call is printed above; what the in-tree kernels run, per shape, below
    _kernel_plans(lse_only=kernel is not None)

    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        from .registration import register

        name = register()
        ok = name in AttentionInterface() and name in AttentionMaskInterface()
        _line("PASS" if ok else "FAIL", "registration", f"'{name}' visible to new interface instances")
        problems += not ok
    except Exception as e:
        _line("FAIL", "registration", f"{type(e).__name__}: {e}")
        problems += 1

    if torch.cuda.is_available():
        device = "cuda"
    elif current.interpreter:
        device = "cpu"
    else:
        device = None
    if device is None:
        _line("FAIL" if args.require_gpu else "SKIP", "self-check", "no GPU")
        problems += args.require_gpu
    else:
        try:
            ok, detail = _self_check(device)
        except Exception as e:
            ok, detail = False, f"{type(e).__name__}: {e}"
        _line("PASS" if ok else "FAIL", "self-check", detail)
        problems += not ok
        from .probe import print_report

        print_report(_line, torch.device(device))

    print(f"doctor: {'OK' if not problems else f'{problems} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
