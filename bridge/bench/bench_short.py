"""Short calls on the GPU: the public path's fwd+bwd and forward against SDPA, with host and device time apart.

Per shape and path (transformers' sdpa_attention_forward; the bridge's registered attention function as shipped,
`auto`; auto with the opt-in CUDA-graph replay, `graphs` (fwd+bwd only); the portable kernels):
* ms: median of triton's do_bench (each call alone, L2 flushed): what a loop of calls costs, host gaps included;
  BENCH_ROUNDS rounds (default 7), each timing every column once, interleaved: the median over rounds and the
  rounds' range are reported (a host-bound call's time moves with the CPU's pace from one moment to the next);
* host us: CPU time to queue one call in a steady loop (30 calls back to back behind a GPU spin long enough that
  none waits for the GPU; median of 7 such loops);
* device us: GPU time of one call with no host gaps (20 calls queued behind a spin, each after an L2 flush, the
  flushes' own time taken off).
Also: whether the public path's output equals sglang's kernel on each shape's inputs, where the CPU time of a call
goes (cProfile, torch.profiler's driver calls), and fp32's errors against fp64 beside FlashAttention's bound.
BENCH_PARTS=calls,profile,fp32 (default all); results in $OUT/bench_short.json and .md.
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
from common import CausalLayer, call_inputs, median_ms, report_sglang, run_parts

PARTS = set(os.environ.get("BENCH_PARTS", "calls,profile,fp32").split(","))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))  # interleaved do_bench rounds per (shape, column, part)
SHAPES = [  # (name, batch, seq, hq, hkv, d, variants of auto); packed: one row of `batch` sequences
    ("2x2048 32/8 D128", 2, 2048, 32, 8, 128, ()),
    ("8x1024 32/8 D128", 8, 1024, 32, 8, 128, ()),
    ("1x8192 32/8 D128", 1, 8192, 32, 8, 128, ()),
    ("4x4096 32/8 D128", 4, 4096, 32, 8, 128, ()),
    ("4x4096 16/16 D128", 4, 4096, 16, 16, 128, ()),
    ("4x4096 32/8 D64", 4, 4096, 32, 8, 64, ()),
    ("packed 26 seqs=18432 32/8 D128", 26, 18432, 32, 8, 128, ()),
    # the short shapes again, last: their host time sits near their device time, so run-to-run spread shows here
    ("2x2048 32/8 D128, again", 2, 2048, 32, 8, 128, ()),
    ("8x1024 32/8 D128, again", 8, 1024, 32, 8, 128, ()),
]
SPIN_PER_MS = 2_000_000  # torch.cuda._sleep cycles per ms, about (1.98 GHz)
results: dict = {}


def host_us(fn, calls=30, loops=7, per_call_ms=3.0):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(loops):
        torch.cuda._sleep(int(SPIN_PER_MS * per_call_ms * calls * 1.5))
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls)
        torch.cuda.synchronize()
    return statistics.median(out) * 1e6


def device_us(fn, calls=20, per_call_ms=3.0):
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")

    def timed(body):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(SPIN_PER_MS * per_call_ms * calls * 1.5))
        a.record()
        for _ in range(calls):
            flush.zero_()
            body()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) * 1e3 / calls

    fn()
    runs = [timed(fn) for _ in range(3)]
    flushes = [timed(lambda: None) for _ in range(3)]
    return statistics.median(runs) - statistics.median(flushes)


def _variants(d):
    """auto with one choice changed (config tables / launch path), applied and undone around a measurement."""
    from sglang_attn_bridge import config, launch, settings

    def cfg(**changes):
        def apply():
            base = (config.GPU_FWD[d], config.GPU_BWD[d])
            config.set_config(d, **changes)
            return lambda: config.set_config(d, fwd=base[0], bwd=base[1])

        return apply

    def jit():
        off = settings.override(direct_launch=False)
        off.__enter__()
        launch.clear()

        def undo():
            off.__exit__(None, None, None)
            launch.clear()

        return undo

    return {
        "auto, Triton fwd": cfg(gluon_ws=0),
        "auto, two streams": cfg(overlap_min_scores=0),
        "auto, one stream": cfg(overlap=False),
        "auto, JIT launches": jit,
    }


def calls_part():
    from sglang_attn_bridge import settings
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from sglang_attn_bridge.scoring import Scoring
    from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    kern = resolve(refresh=True).kernel
    rows = []
    for name, b, s, hq, hkv, d, wanted in SHAPES:
        q, k, v, do, mod, kw, lay = call_inputs(name, b, s, hq, hkv, d)
        packed = name.startswith("packed")

        def both(f, kw=kw):
            def run():
                out, _ = f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)
                out.backward(do)
                q.grad = k.grad = v.grad = None

            return run

        def fwd(f, kw=kw):
            def run():
                with torch.no_grad():
                    f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)

            return run

        row = {"shape": name}
        if kern is not None:
            with torch.no_grad():
                mine = triton_attention_forward(mod, q, k, v, None, scaling=d**-0.5, **kw)[0]
                qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
                ref = sglang_forward(kern, qt, kt, vt, lay, Scoring(d**-0.5, True))
            row["auto equals sglang"] = bool(torch.equal(mine, ref))
        cols = {"auto": ({}, None), "graphs": ({"graphs": True}, None), "portable": ({"portable": True}, None)}
        variants = _variants(d)
        cols.update({f"auto, {w}": ({}, variants[f"auto, {w}"]) for w in wanted})
        if not packed:
            cols = {"sdpa": (None, None), **cols}
        # do_bench ms in interleaved rounds: every (column, part) once per round, so drift and a slow spell of the
        # CPU hit every column alike; the median over rounds is reported with the rounds' spread
        timed = []
        for col, (over, apply) in cols.items():
            f = sdpa_attention_forward if over is None else triton_attention_forward
            # graphs capture calls that need gradients only: its forward alone is auto's
            parts = (("fwd+bwd", both), ("fwd", fwd)) if apply is None and col != "graphs" else (("fwd+bwd", both),)
            timed += [(col, part, over, apply, mk(f)) for part, mk in parts]
        samples: dict = {}
        for _ in range(ROUNDS):
            for col, part, over, apply, run in timed:
                key = f"{col} {part}"
                if isinstance(samples.get(key), str):
                    continue
                undo = apply() if apply else None
                try:
                    with settings.override(**(over or {})):
                        samples.setdefault(key, []).append(median_ms(run, [q, k, v]))
                except Exception as e:
                    samples[key] = f"{type(e).__name__}: {str(e)[:160]}"
                finally:
                    if undo:
                        undo()
        for col, part, over, apply, run in timed:
            key = f"{col} {part}"
            val = samples[key]
            if isinstance(val, str):
                row[key] = val
                continue
            row[key] = statistics.median(val)
            row[key + " rounds"] = val
            undo = apply() if apply else None
            try:
                with settings.override(**(over or {})):
                    row[key + " host us"] = host_us(run)
                    row[key + " device us"] = device_us(run)
            finally:
                if undo:
                    undo()
        rows.append(row)
        print(json.dumps(row), flush=True)
    results["calls"] = rows


def profile_part():
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    q = torch.randn(2, 32, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2048, 8, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2).detach().requires_grad_()
    do = torch.randn(2, 2048, 32, 128, device="cuda", dtype=torch.bfloat16)
    mod = CausalLayer()
    mod.num_key_value_groups = 4
    texts = {}
    for name, f in (("auto", triton_attention_forward), ("sdpa", sdpa_attention_forward)):

        def run(f=f):
            out, _ = f(mod, q, k, v, None, scaling=128**-0.5)
            out.backward(do)
            q.grad = k.grad = v.grad = None

        for _ in range(5):
            run()
        torch.cuda.synchronize()
        if name == "auto":
            prof = cProfile.Profile()
            torch.cuda._sleep(SPIN_PER_MS * 200)
            prof.enable()
            for _ in range(50):
                run()
            prof.disable()
            torch.cuda.synchronize()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
            texts["cprofile auto (50 calls)"] = buf.getvalue()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        torch.cuda._sleep(SPIN_PER_MS * 200)
        with torch.profiler.profile(activities=acts) as p:
            for _ in range(10):
                run()
            torch.cuda.synchronize()
        texts[f"torch.profiler {name} (10 calls)"] = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=22)
    results["profile"] = texts
    for k_, t in texts.items():
        print(f"== {k_}\n{t[:7000]}", flush=True)


FP32_CASES = [  # bridge/tests/gpu/test_grads.py's cases
    ("causal GQA packed", [1000, 1, 333, 700], 32, 8, 128, dict()),
    ("D64 MHA", [700, 64], 16, 16, 64, dict()),
    ("window", [900, 100], 16, 4, 128, dict(window=199)),
    ("softcap, scale 0.2", [600, 77], 8, 2, 64, dict(softcap=20.0, scale=0.2)),
    ("non-causal", [500, 300], 8, 8, 128, dict(causal=False)),
]


def fp32_part():
    from sglang_attn_bridge import attention_varlen
    from sglang_attn_bridge.reference import reference_varlen

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for name, lens, hq, hkv, d, kw in FP32_CASES:
        gen = torch.Generator().manual_seed(len(name))
        t = sum(lens)
        q, k, v = (torch.randn(t, h, d, generator=gen).cuda() for h in (hq, hkv, hkv))
        do = torch.randn(t, hq, d, generator=gen).cuda()
        cu = torch.tensor([0] + lens).cumsum(0).to("cuda", torch.int32)
        causal, window = kw.get("causal", True), kw.get("window")
        scale, softcap = kw.get("scale", d**-0.5), kw.get("softcap", 0.0)

        def grads(fn, dtype, q=q, k=k, v=v, do=do):
            xs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
            o = fn(*xs)
            o.backward(do.to(dtype))
            return [o.detach()] + [x.grad for x in xs]

        def plain(q, k, v, cu=cu, scale=scale, causal=causal, window=window, softcap=softcap):
            w = None if window is None else window + 1
            return reference_varlen(q, k, v, cu, cu, scale, causal=causal, window=w, softcap=softcap or None)

        def bridge(q, k, v, cu=cu, scale=scale, causal=causal, window=window, softcap=softcap):
            return attention_varlen(
                q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=causal, window=window, softcap=softcap, scale=scale
            )

        ref = grads(plain, torch.float64)
        same = grads(plain, torch.float32)
        t0 = time.time()
        mine = grads(bridge, torch.float32)
        torch.cuda.synchronize()
        row = {"case": name, "first bridge call s": time.time() - t0}
        for part, m, s_, r in zip(("o", "dq", "dk", "dv"), mine, same, ref):
            err, base = (m.double() - r).abs().max().item(), (s_.double() - r).abs().max().item()
            row[part] = {"bridge": err, "torch fp32": base, "bound": 2 * base + 1e-6, "ratio": err / (2 * base + 1e-6)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    results["fp32"] = rows


def table() -> str:
    lines = []
    if "calls" in results:
        lines += ["", "public path: ms (do_bench) [host us to queue | device us] (x = sdpa ms / this ms)", ""]
        for r in results["calls"]:
            cells = []
            for key, val in r.items():
                if key == "shape" or key.endswith(" us") or not isinstance(val, float):
                    continue
                spread = r.get(key + " rounds")
                sp = f" ({min(spread):.3f}-{max(spread):.3f} over {len(spread)} rounds)" if spread else ""
                col, part = key.rsplit(" ", 1)
                base = r.get(f"sdpa {part}")
                x = f" {base / val:.2f}x" if isinstance(base, float) and col != "sdpa" else ""
                cells.append(
                    f"{key} {val:.3f}{x}{sp} [{r.get(key + ' host us', 0):.0f} | {r.get(key + ' device us', 0):.0f}]"
                )
            eq = r.get("auto equals sglang")
            lines.append(f"{r['shape']:32} (auto == sglang: {eq})\n    " + "\n    ".join(cells))
    if "fp32" in results:
        lines += ["", "fp32 vs fp64: bridge max error / FlashAttention bound (ratio)", ""]
        for r in results["fp32"]:
            cells = [f"{p} {r[p]['bridge']:.3g}/{r[p]['bound']:.3g} ({r[p]['ratio']:.2f})" for p in ("dq", "dk", "dv")]
            lines.append(f"{r['case']:22} " + " | ".join(cells))
    return "\n".join(lines)


def main() -> int:
    report_sglang()
    parts = (("calls", calls_part), ("profile", profile_part), ("fp32", fp32_part))
    run_parts("bench_short", parts, PARTS, results, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
