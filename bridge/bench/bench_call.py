"""One attention call as a user makes it, on the GPU: what exactness costs, what a call costs, and fp32's accuracy.

Parts (BENCH_PARTS=ftz,calls,probe,fp32,profile; all by default), each printed as a table and kept in
$OUT/bench_call.json:
* ftz: device time of the in-tree forward as committed (sglang's exp, interior=3) against the earlier defaults
  (ex2.approx.ftz; at D64 also the select-free interior=2), and whether each still equals sglang's bits on inputs
  with subnormal outputs (logits x16, half of v zero).
* calls: the registered transformers attention function, forward+backward and forward only, bf16, causal, q/k
  [B, H, S, D] contiguous and v a transposed view (as after RoPE), beside transformers' sdpa_attention_forward on
  the same tensors: `auto` (as shipped) and `portable` (no Gluon, no TMA, no inline PTX: what ROCm runs). ms are
  medians of triton's do_bench; host us is the CPU time to queue one call (median of 20, GPU kept busy).
* probe: the first-use probe of each class the calls part met (its time includes the kernels' compiles).
* fp32: errors against fp64 of sglang's fp32 output, torch's fp32 attention and the bridge (output and gradients).
* profile: where the CPU time of one forward+backward call goes (cProfile, top functions by own time).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

import torch
from common import CausalLayer, call_inputs, median_ms, packed_lengths, report_sglang, run_parts

PARTS = set(os.environ.get("BENCH_PARTS", "ftz,calls,probe,fp32,profile").split(","))
SHAPES = [  # (name, batch, seq, hq, hkv, d); packed: one row of `batch` sequences
    ("1x8192 32/8 D128", 1, 8192, 32, 8, 128),
    ("4x4096 32/8 D128", 4, 4096, 32, 8, 128),
    ("4x4096 16/16 D128", 4, 4096, 16, 16, 128),
    ("4x4096 32/8 D64", 4, 4096, 32, 8, 64),
    ("2x2048 32/8 D128", 2, 2048, 32, 8, 128),
    ("8x1024 32/8 D128", 8, 1024, 32, 8, 128),
    ("packed 26 seqs=18432 32/8 D128", 26, 18432, 32, 8, 128),
]
results: dict = {}


def host_us(fn, n=20):
    """CPU time to queue one call, with the GPU kept busy so nothing waits on it (median of n)."""
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU spin: the call is queued behind it
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def ftz_part():
    from dataclasses import replace

    from sglang_attn_bridge import config, kernel_launches, layout
    from sglang_attn_bridge.scoring import Scoring
    from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward

    kern = resolve(refresh=True).kernel
    rows = []
    for name, lens, hq, hkv, d in (
        ("1x8192 32/8 D128", [8192], 32, 8, 128),
        ("4x4096 32/8 D128", [4096] * 4, 32, 8, 128),
        ("4x4096 32/8 D64", [4096] * 4, 32, 8, 64),
        ("packed 26 32/8 D128", packed_lengths(18432, 26, seed=7), 32, 8, 128),
        ("packed 26 32/8 D64", packed_lengths(18432, 26, seed=7), 32, 8, 64),
    ):
        t = sum(lens)
        gen = torch.Generator().manual_seed(1)
        q = torch.randn(1, t, hq, d, generator=gen).to("cuda", torch.bfloat16)
        k = torch.randn(1, t, hkv, d, generator=gen).to("cuda", torch.bfloat16)
        v = torch.randn(1, t, hkv, d, generator=gen).to("cuda", torch.bfloat16)
        big = [(x.float() * 16).to(torch.bfloat16) for x in (q, k)]
        vz = (v.float() * (torch.rand(v.shape, device="cuda") >= 0.5)).to(torch.bfloat16)
        cu = torch.tensor([0] + lens).cumsum(0).to("cuda", torch.int32)
        lay = layout.from_cu_seqlens(cu, cu, t, t)
        ref = sglang_forward(kern, big[0], big[1], vz, lay, Scoring(d**-0.5, True)) if kern else None
        base = config.GPU_FWD[d]
        variants = {"committed": base, "exp_ftz": replace(base, exp_ftz=True)}
        if d == 64:
            variants["exp_ftz+interior2 (old D64)"] = replace(base, exp_ftz=True, interior=2)
        row = {"shape": name}
        for vname, cfg in variants.items():
            config.set_config(d, fwd=cfg)
            try:
                row[vname] = median_ms(lambda: kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True)))
                if ref is not None:
                    mine = kernel_launches.forward(big[0], big[1], vz, lay, Scoring(d**-0.5, True))[0]
                    row[vname + " differs"] = int((mine != ref).sum())
            finally:
                config.set_config(d, fwd=base)
        rows.append(row)
        print(json.dumps(row), flush=True)
    results["ftz"] = rows


def calls_part():
    from sglang_attn_bridge import settings
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows = []
    for name, b, s, hq, hkv, d in SHAPES:
        q, k, v, do, mod, kw, _ = call_inputs(name, b, s, hq, hkv, d)
        packed = name.startswith("packed")

        def both(f, kw=kw):
            def run():
                out, _ = f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)
                out.backward(do)

            return run

        def fwd(f, kw=kw):
            def run():
                with torch.no_grad():
                    f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)

            return run

        row = {"shape": name}
        cols = {"auto": {}, "portable": {"portable": True}}
        if not packed:
            cols = {"sdpa": None, **cols}
        for col, over in cols.items():
            f = sdpa_attention_forward if over is None else triton_attention_forward
            with settings.override(**(over or {})):
                for part, mk in (("fwd+bwd", both), ("fwd", fwd)):
                    run = mk(f)
                    try:
                        row[f"{col} {part}"] = median_ms(run, [q, k, v])
                        row[f"{col} {part} host us"] = host_us(run)
                    except Exception as e:
                        row[f"{col} {part}"] = f"{type(e).__name__}: {str(e)[:100]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    results["calls"] = rows


def probe_part():
    from sglang_attn_bridge import probe

    results["probe"] = {k: [d.in_tree, d.reason] for k, d in probe._decisions.items()}
    for k, d in probe._decisions.items():
        cls = json.loads(k)
        print(f"probe {cls['dtype']} D{cls['head_dim']} {cls['kernel']}: {d.in_tree} {d.reason}", flush=True)


def fp32_part():
    from sglang_attn_bridge import attention_varlen, layout
    from sglang_attn_bridge.reference import reference_varlen
    from sglang_attn_bridge.scoring import Scoring
    from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward

    kern = resolve(refresh=True).kernel
    torch.backends.cuda.matmul.allow_tf32 = False
    out = []
    for lens, hq, hkv, d in (([1000, 333, 1], 16, 4, 128), ([700, 64], 8, 8, 64)):
        gen = torch.Generator().manual_seed(2)
        t = sum(lens)
        q, k, v = (torch.randn(t, h, d, generator=gen).cuda() for h in (hq, hkv, hkv))
        do = torch.randn(t, hq, d, generator=gen).cuda()
        cu = torch.tensor([0] + lens).cumsum(0).to("cuda", torch.int32)
        lay = layout.from_cu_seqlens(cu, cu, t, t)

        def grads(fn, dtype, q=q, k=k, v=v, do=do):
            xs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
            o = fn(*xs)
            o.backward(do.to(dtype))
            return [o.detach()] + [x.grad for x in xs]

        def plain(q, k, v, cu=cu, d=d):
            return reference_varlen(q, k, v, cu, cu, d**-0.5)

        def bridge(q, k, v, cu=cu):
            return attention_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu)

        ref = grads(plain, torch.float64)
        row = {"case": f"{hq}/{hkv} D{d} {lens}"}
        for name, got in (("torch fp32", grads(plain, torch.float32)), ("bridge fp32", grads(bridge, torch.float32))):
            for part, g, r in zip(("o", "dq", "dk", "dv"), got, ref):
                row[f"{name} {part}"] = (g.double() - r).abs().max().item()
        if kern is not None:
            o_s = sglang_forward(kern, q[None], k[None], v[None], lay, Scoring(d**-0.5, True))[0]
            row["sglang fp32 o"] = (o_s.double() - ref[0]).abs().max().item()
        out.append(row)
        print(json.dumps(row), flush=True)
    results["fp32"] = out


def profile_part():
    from sglang_attn_bridge.hf_attention import triton_attention_forward

    q = torch.randn(2, 32, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2048, 8, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2).detach().requires_grad_()
    do = torch.randn(2, 2048, 32, 128, device="cuda", dtype=torch.bfloat16)
    mod = CausalLayer()

    def run():
        out, _ = triton_attention_forward(mod, q, k, v, None, scaling=128**-0.5)
        out.backward(do)

    for _ in range(5):
        run()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(50):
        run()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
    text = buf.getvalue()
    results["profile"] = text
    print(text[:6000], flush=True)


def table() -> str:
    lines = []
    if "ftz" in results:
        lines += ["", "in-tree forward, device ms (elements differing from sglang on subnormal-output inputs)", ""]
        for r in results["ftz"]:
            cells = [f"{k} {r[k]:.3f} ({r.get(k + ' differs', '?')})" for k in r if k != "shape" and "differs" not in k]
            lines.append(f"{r['shape']:24} " + " | ".join(cells))
    if "calls" in results:
        lines += ["", "public path, ms (x = sdpa / this; host us to queue the call)", ""]
        for r in results["calls"]:
            cells = []
            for part in ("fwd+bwd", "fwd"):
                base = r.get(f"sdpa {part}")
                for col in ("sdpa", "auto", "portable"):
                    val = r.get(f"{col} {part}")
                    if not isinstance(val, float):
                        continue
                    x = f" {base / val:.2f}x" if isinstance(base, float) and col != "sdpa" else ""
                    cells.append(f"{col} {part} {val:.3f}{x} [{r[f'{col} {part} host us']:.0f}us]")
            lines.append(f"{r['shape']:32} " + " | ".join(cells))
    return "\n".join(lines)


def main() -> int:
    report_sglang()
    parts = (
        ("ftz", ftz_part),
        ("calls", calls_part),
        ("probe", probe_part),
        ("fp32", fp32_part),
        ("profile", profile_part),
    )
    run_parts("bench_call", parts, PARTS, results, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
