"""The bridge as a user meets it: `register()`, then the registered attention function called the way transformers
calls it, side by side with transformers' own attention functions on the same tensors; then whole training steps.

Part `attn` (forward+backward of one attention call, bf16, causal; q/k [B, H, S, D] contiguous as after RoPE, v a
transposed view): SDPA (`sdpa_attention_forward`), the bridge with each forward forced (`triton`: in-tree,
`sglang`: sglang's kernel + an LSE pass) and as shipped (`auto`: the probe decides per class), and on a packed row
torch's `varlen_attn` registered as an attention function (K/V expanded where it has no GQA). Part `train`: an SGD
step of a Qwen3-style model (8 layers, hidden 2048, 16/8 heads, D128, random weights) on a batch of 4x4096, 16x1024
and one packed row of 26 sequences (18,432 tokens, position_ids restarting), eager and under torch.compile; tokens/s
and peak memory. Part `check`: the probe's decision per class, and compiled vs eager logits of the bridge.
Medians of triton's do_bench. Prints one table per part and writes bench_public.json and .md under $OUT.
BENCH_PARTS=exact,check,profile,attn,train,compile selects parts (train = eager steps, compile = compiled steps).
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import os
import sys
import time

import torch
from common import median_ms, packed_lengths, report_sglang, run_parts

PARTS = set(os.environ.get("BENCH_PARTS", "exact,check,profile,attn,train,compile").split(","))
FWD_ENV = "SGLANG_ATTN_BRIDGE_FORWARD"
ATTN_SHAPES = [  # (name, batch, seq, hq, hkv, d)
    ("1x8192 32/8 D128", 1, 8192, 32, 8, 128),
    ("4x4096 32/8 D128", 4, 4096, 32, 8, 128),
    ("4x4096 16/16 D128", 4, 4096, 16, 16, 128),
    ("4x4096 32/8 D64", 4, 4096, 32, 8, 64),
    ("2x2048 32/8 D128", 2, 2048, 32, 8, 128),
    ("8x1024 32/8 D128", 8, 1024, 32, 8, 128),
]
PACKED = ("packed 26 seqs=18432 32/8 D128", 26, 18432, 32, 8, 128)


class Module(torch.nn.Module):
    is_causal = True


def register_varlen(name="varlen"):
    """torch's varlen_attn as a transformers attention function (the packed baseline): sequences from cu_seq_lens
    kwargs or from position_ids restarts, causal as window (-1, 0)."""
    from sglang_attn_bridge.mask import triton_mask
    from torch.nn.attention.varlen import varlen_attn
    from transformers import AttentionInterface, AttentionMaskInterface

    gqa = "enable_gqa" in inspect.signature(varlen_attn).parameters
    cache = {}

    def cu_of(pos):
        hit = cache.get("pos")
        if hit is not None and hit[0] is pos:
            return hit[1]
        p = pos[0]
        starts = torch.nonzero(torch.cat([p.new_ones(1, dtype=torch.bool), p[1:] - p[:-1] != 1])).flatten()
        cu = torch.cat([starts, starts.new_tensor([p.numel()])]).to(torch.int32)
        value = (cu, int((cu[1:] - cu[:-1]).max()))
        cache["pos"] = (pos, value)
        return value

    def fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        b, hq, s, d = query.shape
        if kw.get("cu_seq_lens_q") is not None:
            cu, mx = kw["cu_seq_lens_q"].to(torch.int32), int(kw["max_length_q"])
        elif kw.get("position_ids") is not None and b == 1:
            cu, mx = cu_of(kw["position_ids"])
        else:
            cu = torch.arange(0, (b + 1) * s, s, device=query.device, dtype=torch.int32)
            mx = s
        q = query.transpose(1, 2).reshape(b * s, hq, d)
        k = key.transpose(1, 2).reshape(b * s, key.shape[1], d)
        v = value.transpose(1, 2).reshape(b * s, key.shape[1], d)
        extra = {}
        if gqa:
            extra["enable_gqa"] = True
        elif k.shape[1] != hq:
            k = k.repeat_interleave(hq // k.shape[1], dim=1)
            v = v.repeat_interleave(hq // v.shape[1], dim=1)
        o = varlen_attn(q, k, v, cu, cu, mx, mx, scale=scaling, window_size=(-1, 0), **extra)
        return o.view(b, s, hq, d), None

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, triton_mask)
    return fn


def with_forward(mode, fn):
    """fn run with the bridge's `forward` setting = mode."""
    from sglang_attn_bridge import settings

    def run():
        with settings.override(forward=mode):
            return fn()

    return run


def attn_rows(results):
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    varlen = register_varlen()
    mod = Module()
    rows = []
    for name, b, s, hq, hkv, d in ATTN_SHAPES + [PACKED]:
        packed = name.startswith("packed")
        rows_ = 1 if packed else b
        seq = s
        torch.manual_seed(0)
        q = torch.randn(rows_, hq, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(rows_, hkv, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(rows_, seq, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).detach()
        v.requires_grad_(True)
        do = torch.randn(rows_, seq, hq, d, device="cuda", dtype=torch.bfloat16)
        kw = {}
        if packed:
            lens = packed_lengths(seq, b, seed=7)
            pos = torch.cat([torch.arange(n) for n in lens])[None].cuda()
            kw["position_ids"] = pos

        def call(f):
            def run():
                out, _ = f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)
                out.backward(do)

            return run

        mod.num_key_value_groups = hq // hkv  # what sdpa_attention_forward reads to expand K/V
        cols = {
            "bridge_triton": with_forward("triton", call(triton_attention_forward)),
            "bridge_auto": with_forward("auto", call(triton_attention_forward)),
            "bridge_sglang": with_forward("sglang", call(triton_attention_forward)),
        }
        if packed:
            cols["varlen"] = call(varlen)
        else:
            cols["sdpa"] = call(sdpa_attention_forward)
        row = {"shape": name}
        for col, fn in cols.items():
            try:
                row[col] = median_ms(fn, [q, k, v])
            except Exception as e:
                row[col] = f"{type(e).__name__}: {str(e)[:120]}"
        base = row.get("sdpa", row.get("varlen"))
        for col in ("bridge_triton", "bridge_auto", "bridge_sglang"):
            if isinstance(row.get(col), float) and isinstance(base, float):
                row[col + "_x"] = base / row[col]
        rows.append(row)
        print(json.dumps(row), flush=True)
    results["attn"] = rows


_MODEL = []


def qwen3(attn):
    """One random-weight model for every row (built on the GPU once; the attention implementation is switched)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if not _MODEL:
        cfg = Qwen3Config(
            vocab_size=32000,
            hidden_size=2048,
            intermediate_size=6144,
            num_hidden_layers=8,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            max_position_embeddings=32768,
        )
        torch.manual_seed(0)
        with torch.device("cuda"):
            _MODEL.append(Qwen3ForCausalLM(cfg).to(torch.bfloat16))
    model = _MODEL[0]
    model.set_attn_implementation(attn)
    return model


def step_ms(step, warmup=2, reps=6):
    """Median device-event time of whole steps (each far longer than a launch)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def train_inputs(kind):
    g = torch.Generator().manual_seed(1)
    if kind == "4x4096":
        ids = torch.randint(0, 32000, (4, 4096), generator=g)
        return dict(input_ids=ids.cuda())
    if kind == "16x1024":
        return dict(input_ids=torch.randint(0, 32000, (16, 1024), generator=g).cuda())
    lens = packed_lengths(18432, 26, seed=3)
    ids = torch.randint(0, 32000, (1, 18432), generator=g)
    pos = torch.cat([torch.arange(n) for n in lens])[None]
    return dict(input_ids=ids.cuda(), position_ids=pos.cuda())


def train_step(fwd, opt, inputs):
    """One optimizer step of a causal-LM model on `inputs` (the closure holds only what it is given)."""

    def step():
        out = fwd(**inputs, labels=inputs["input_ids"])
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _with_graphs(step):
    from sglang_attn_bridge import graphs, settings

    def run():
        with settings.override(graphs=True):
            step()

    graphs.clear()
    return run


def train_rows(results, compiled):
    impls = {
        "4x4096": ["sdpa", "triton", "triton+graphs"],
        "16x1024": ["sdpa", "triton", "triton+graphs"],
        "packed": ["sdpa", "varlen", "triton", "triton+graphs"],
    }
    if compiled:
        impls = {"4x4096": ["sdpa", "triton"], "packed": ["varlen", "triton"]}
    register_varlen()
    rows = results.setdefault("train", [])
    for kind, names in impls.items():
        inputs = train_inputs(kind)
        tokens = inputs["input_ids"].numel()
        for attn in names:
            graphed = attn == "triton+graphs"  # the opt-in CUDA-graph replay of repeated attention calls
            model = qwen3("triton" if graphed else attn)
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            fwd = torch.compile(model) if compiled else model

            step = train_step(fwd, opt, inputs)
            if graphed:
                step = _with_graphs(step)
            row = {
                "batch": kind,
                "attn": {"triton": "bridge (auto)", "triton+graphs": "bridge (auto, graphs)"}.get(attn, attn),
                "mode": "compiled" if compiled else "eager",
            }
            try:
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                row["first_step_s"] = time.perf_counter() - t0
                torch.cuda.reset_peak_memory_stats()
                ms = step_ms(step)
                row.update(ms=ms, tokens_per_s=tokens / ms * 1e3, peak_gib=torch.cuda.max_memory_allocated() / 2**30)
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
            del step, opt, fwd
            if graphed:
                from sglang_attn_bridge import graphs

                graphs.clear()
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            torch._dynamo.reset()


def exact(results):
    """The direct relaunch (launch.py) gives the bits of Triton's own launch path: public fwd+bwd with it off and on,
    torch.equal on o, dq, dk, dv, over layouts and classes (dense, padded, packed, D64, window, softcap, and q/k/v
    views that start off 16-byte alignment, which Triton specializes on)."""
    from sglang_attn_bridge import settings
    from sglang_attn_bridge.hf_attention import triton_attention_forward

    mod = Module()
    cases = []
    for b, s, hq, hkv, d, extra in (
        (2, 1024, 16, 4, 128, {}),
        (2, 1000, 8, 8, 64, {}),
        (1, 2048, 16, 4, 128, {"packed": True}),
        (2, 512, 8, 2, 128, {"pad": True}),
        (1, 1024, 8, 2, 128, {"sliding_window": 100}),
        (1, 1024, 8, 2, 64, {"softcap": 20.0}),
        (2, 512, 8, 2, 128, {"offset": True}),
    ):
        cases.append((b, s, hq, hkv, d, extra))
    out = []
    for b, s, hq, hkv, d, extra in cases:
        torch.manual_seed(0)
        extra = dict(extra)
        off = 8 if extra.pop("offset", False) else 0
        base = torch.randn(b * hq * s * d + off, device="cuda", dtype=torch.bfloat16)
        q0 = base[off:].view(b, hq, s, d)
        k0 = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
        v0 = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        do = torch.randn(b, s, hq, d, device="cuda", dtype=torch.bfloat16)
        mask, kw = None, {}
        if extra.pop("packed", False):
            kw["position_ids"] = torch.cat([torch.arange(n) for n in (700, 1, 900, 447)])[None].cuda()
        if extra.pop("pad", False):
            mask = torch.ones(b, s, dtype=torch.long, device="cuda")
            mask[1, :100] = 0
        kw.update(extra)
        got = []
        for direct in (False, True, True):  # Triton's path, then the direct path's first (miss) and second call
            with settings.override(direct_launch=direct):
                q, k, v = (t.detach().requires_grad_() for t in (q0, k0, v0))
                o, _ = triton_attention_forward(mod, q, k, v, mask, scaling=d**-0.5, **kw)
                o.backward(do)
            got.append([o.detach().clone(), q.grad, k.grad, v.grad])
        same = all(torch.equal(a, c) for other in got[1:] for a, c in zip(got[0], other))
        name = f"{b}x{s} {hq}/{hkv} D{d} {kw and sorted(kw) or ''}{' off-16B' if off else ''}"
        out.append({"case": name, "bitwise_equal": same})
        print(f"direct launch vs Triton's: {name}: {'equal' if same else 'DIFFERENT'}", flush=True)
    results["direct_launch_equal"] = out


def profile(results):
    """Where the CPU time of one public fwd+bwd call goes on a short shape (2x2048 32/8 D128): cProfile of 30 calls."""
    import cProfile
    import io
    import pstats

    from sglang_attn_bridge.hf_attention import triton_attention_forward

    mod = Module()
    q = torch.randn(2, 32, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(2, 2048, 32, 128, device="cuda", dtype=torch.bfloat16)

    def run():
        out, _ = triton_attention_forward(mod, q, k, v, None, scaling=128**-0.5)
        out.backward(do)

    for _ in range(5):
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(30):
        run()
    cpu_us = (time.perf_counter() - t0) / 30 * 1e6  # queueing only while the CPU is ahead of the GPU
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(30):
        run()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
    results["profile"] = {"cpu_us_per_call": cpu_us, "top": buf.getvalue()}
    print(f"CPU us per public fwd+bwd call (2x2048): {cpu_us:.0f}")
    print(buf.getvalue()[-6000:], flush=True)


def check(results):
    """The probe's decision per class (the doctor's lines), then compiled vs eager on a small model."""
    from sglang_attn_bridge import probe

    lines = probe.report_lines(torch.device("cuda"))
    results["probe"] = [dict(zip(("class", "forward", "reason"), line)) for line in lines]
    for line in lines:
        print("probe:", *line, sep="  ", flush=True)
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=512,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    eager = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)
    eager.set_attn_implementation("triton")
    comp = copy.deepcopy(eager)
    comp.forward = torch.compile(comp.forward, fullgraph=True)
    ids = torch.randint(0, 512, (2, 1024), device="cuda")
    pos = torch.cat([torch.arange(700), torch.arange(324)])[None].expand(2, -1).cuda()
    out = {}
    for name, m in (("eager", eager), ("compiled", comp)):
        r = m(input_ids=ids, position_ids=pos, labels=ids)
        r.loss.backward()
        out[name] = (r.logits.float(), m.model.layers[0].self_attn.q_proj.weight.grad.float())
    (le, ge), (lc, gc) = out["eager"], out["compiled"]
    results["compile_check"] = {
        "logits_rel": ((lc - le).norm() / le.norm()).item(),
        "grad_rel": ((gc - ge).norm() / ge.norm()).item(),
    }
    print("compile check (fullgraph, packed position_ids):", results["compile_check"], flush=True)


def markdown(results) -> str:
    meta = results["meta"]
    out = [
        f"{meta['gpu']}, {meta['date']}, torch {meta['torch']}, triton {meta['triton']}, transformers "
        f"{meta['transformers']}, sglang {meta['sglang']}",
        "",
    ]
    if results.get("attn"):
        out += [
            "Attention call, forward+backward, ms (x = baseline time / bridge time; baseline SDPA, packed row: "
            "varlen_attn)",
            "",
            "| shape | baseline | bridge in-tree fwd | bridge sglang fwd | bridge auto |",
            "|---|---|---|---|---|",
        ]
        for r in results["attn"]:
            base = r.get("sdpa", r.get("varlen"))

            def cell(c):
                v = r.get(c)
                return f"{v:.2f} ({r[c + '_x']:.2f}x)" if isinstance(v, float) and c + "_x" in r else str(v)

            b = f"{base:.2f}" + (" varlen" if "varlen" in r else " sdpa") if isinstance(base, float) else str(base)
            out.append(
                f"| {r['shape']} | {b} | {cell('bridge_triton')} | {cell('bridge_sglang')} | {cell('bridge_auto')} |"
            )
        out.append("")
    if results.get("train"):
        out += [
            "Training step (Qwen3-style, 8 layers, SGD), tokens/s and peak memory",
            "",
            "| batch | attention | mode | ms | tokens/s | peak GiB | first step s |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in results["train"]:
            if "error" in r:
                out.append(f"| {r['batch']} | {r['attn']} | {r['mode']} | {r['error']} | | | |")
            else:
                out.append(
                    f"| {r['batch']} | {r['attn']} | {r['mode']} | {r['ms']:.1f} | {r['tokens_per_s']:,.0f} | "
                    f"{r['peak_gib']:.1f} | {r['first_step_s']:.1f} |"
                )
        out.append("")
    if results.get("probe"):
        out += ["Probe decisions (auto forward) per class", "", "| class | forward | reason |", "|---|---|---|"]
        out += [f"| {p['class']} | {p['forward']} | {p['reason']} |" for p in results["probe"]]
        out.append("")
    if results.get("direct_launch_equal"):
        eq = results["direct_launch_equal"]
        out.append(
            f"Direct relaunch vs Triton's launch path, public fwd+bwd: {sum(e['bitwise_equal'] for e in eq)} of "
            f"{len(eq)} cases bitwise equal (o, dq, dk, dv)"
        )
        out.append("")
    if results.get("compile_check"):
        c = results["compile_check"]
        out.append(
            f"torch.compile(fullgraph=True) vs eager, bf16 Llama 2 layers, packed position_ids: logits rel. "
            f"diff {c['logits_rel']:.2e}, q_proj grad rel. diff {c['grad_rel']:.2e}"
        )
    return "\n".join(out) + "\n"


def main():
    import transformers
    import triton

    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    mod = report_sglang()
    from sglang_attn_bridge import register

    register()
    results = {
        "meta": dict(
            gpu=torch.cuda.get_device_name(),
            date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            torch=torch.__version__,
            triton=triton.__version__,
            transformers=transformers.__version__,
            sglang=getattr(sys.modules.get("sglang"), "__version__", None) if mod else None,
        )
    }
    parts = [
        ("exact", lambda: exact(results)),
        ("check", lambda: check(results)),
        ("profile", lambda: profile(results)),
        ("attn", lambda: attn_rows(results)),
        ("train", lambda: train_rows(results, False)),
        ("compile", lambda: train_rows(results, True)),
    ]
    run_parts(os.environ.get("BENCH_NAME", "bench_public"), parts, PARTS, results, lambda: markdown(results))


if __name__ == "__main__":
    main()
