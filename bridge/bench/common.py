"""Shared pieces of the GPU scripts: shapes, random inputs, FLOP counts, device-event timing, and the harness the
bench scripts run their parts in (`run_parts`, `median_ms`, `report_sglang`)."""

from __future__ import annotations

import glob
import json
import os
import statistics
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_sglang():
    """sglang's kernel module from the carried wheel (.whl/sglang-*.whl), or None."""
    wheels = sorted(glob.glob(os.path.join(HERE, "..", "..", ".whl", "sglang-*.whl")))
    if not wheels:
        return None
    from sglang_loader import load  # a sibling script: this folder is sys.path[0] for any script run from it

    return load(wheels[-1])


def report_sglang():
    """load_sglang(), its module printed (which sglang the run's bits are compared with)."""
    mod = load_sglang()
    print(f"sglang kernel module: {mod.__name__ if mod else None}", flush=True)
    return mod


def median_ms(fn, grad_to_none=None) -> float:
    """One call alone, as triton's do_bench times it (L2 flushed, 30 ms warm-up, 150 ms of runs): its median ms."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=30, rep=150, grad_to_none=grad_to_none, return_mode="median")


def write_text(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text + "\n")


def run_parts(name: str, parts, selected: set, results: dict, report) -> None:
    """Run each selected (part, fn) in order: a part that raises leaves its error in results[part + "_error"] and
    the others still run (what they measured is kept); the results so far go to $OUT/<name>.json after each part,
    and report() (a text made from them) to $OUT/<name>.md and stdout at the end."""
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    for part, fn in parts:
        if part not in selected:
            continue
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # keep what the other parts measured
            import traceback

            traceback.print_exc()
            results[part + "_error"] = f"{type(e).__name__}: {e}"
        print(f"part {part}: {time.time() - t0:.0f} s", flush=True)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(results, f, indent=1)
    text = report()
    write_text(os.path.join(out, name + ".md"), text)
    print(text)


def packed_lengths(total: int, n: int, seed: int = 0) -> list[int]:
    """n mixed lengths (multiples of 16... not required) summing to total."""
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(n, generator=g) + 0.25
    lens = (w / w.sum() * total).floor().long()
    lens[-1] += total - lens.sum()
    return lens.tolist()


def make_qkv(lens, hq, hkv, d, dtype, device="cuda", requires_grad=False):
    """Packed row [1, T, H, D] tensors and the cu_seqlens."""
    t = sum(lens)
    q = torch.randn(1, t, hq, d, device=device, dtype=dtype)
    k = torch.randn(1, t, hkv, d, device=device, dtype=dtype)
    v = torch.randn(1, t, hkv, d, device=device, dtype=dtype)
    for x in (q, k, v):
        x.requires_grad_(requires_grad)
    cu = torch.tensor([0] + list(lens), device=device).cumsum(0).to(torch.int32)
    return q, k, v, cu


class CausalLayer(torch.nn.Module):
    """What transformers' attention functions read from the calling layer (and num_key_value_groups, set per call)."""

    is_causal = True


def call_inputs(name: str, b: int, s: int, hq: int, hkv: int, d: int, device: str = "cuda"):
    """One bench row's inputs as transformers passes them: q, k (B, H, S, D), v (same shape, from an (B, S, H, D)
    buffer), the output gradient, the calling layer, the keywords (position_ids of a packed row) and the bridge's
    layout. A "packed..." row is b sequences of random lengths summing to s in one row."""
    from sglang_attn_bridge import layout

    packed = name.startswith("packed")
    rows = 1 if packed else b
    torch.manual_seed(0)
    q = torch.randn(rows, hq, s, d, device=device, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(rows, hkv, s, d, device=device, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(rows, s, hkv, d, device=device, dtype=torch.bfloat16).transpose(1, 2).detach()
    v.requires_grad_(True)
    do = torch.randn(rows, s, hq, d, device=device, dtype=torch.bfloat16)
    mod = CausalLayer()
    mod.num_key_value_groups = hq // hkv
    kw = {}
    lay = layout.dense(rows, s, s, q.device)
    if packed:
        lens = packed_lengths(s, b, seed=7)
        kw["position_ids"] = torch.cat([torch.arange(n) for n in lens])[None].to(device)
        cu = torch.tensor([0] + lens).cumsum(0).to(device, torch.int32)
        lay = layout.from_cu_seqlens(cu, cu, s, s)
    return q, k, v, do, mod, kw, lay


def causal_flops(lens, hq, d) -> float:
    return float(sum(2 * s * s * hq * d for s in lens))


def samples_ms(fn, reps: int, lead: int = 0) -> list[float]:
    """Device-event times of `reps` calls (ms). lead > 0: before each call the GPU spins `lead` cycles, long enough
    for the CPU to queue the call behind it, so the timed span holds the call's device work and no launch gap;
    lead = 0: the call starts on an idle GPU, so the span also holds the time the CPU takes to launch it."""
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if lead:
            torch.cuda._sleep(lead)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def launch_us(fn, reps: int = 3) -> float:
    """CPU time to queue one call (us), the most of `reps`: the gap a call timed from an idle GPU includes."""
    worst = 0.0
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        worst = max(worst, time.perf_counter() - t0)
    torch.cuda.synchronize()
    return worst * 1e6


def interleaved_ms(
    runs: dict, rounds: int = 6, reps: int = 5, warmup: int = 3, device_only: bool = False, launch: dict | None = None
) -> dict:
    """Median ms of each named run, timed in alternating rounds so that clock and neighbour drift hit every
    candidate alike; a run that raises during warm-up is reported as its exception instead. device_only: each call
    is queued behind a GPU spin twice its launch time (at 2 GHz), so launch overhead drops out (`launch`, if given,
    receives each run's launch us)."""
    ok, out, lead = {}, {}, {}
    for name, fn in runs.items():
        try:
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            ok[name] = []
            if device_only or launch is not None:
                us = launch_us(fn)
                lead[name] = int(us * 2 * 2000) + 200_000 if device_only else 0
                if launch is not None:
                    launch[name] = us
        except Exception as e:  # a config that does not compile or does not fit
            out[name] = e
    for _ in range(rounds):
        for name in ok:
            ok[name].extend(samples_ms(runs[name], reps, lead.get(name, 0)))
    out.update({name: statistics.median(t) for name, t in ok.items()})
    return out


def pass_through_function(body):
    """An autograd Function that passes its input through and runs body() in its backward (in autograd's device
    thread for a CUDA input, unless multithreading is off): what the engine costs a Python backward around it."""

    class PassThrough(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            body()
            return g

    return PassThrough
