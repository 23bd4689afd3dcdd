"""Where the CPU time of one short attention call goes, on the GPU machine: the public call taken apart.

Each row is the CPU time to queue one call of the named piece (us): 30 calls back to back behind a GPU spin long
enough that none waits for the GPU, the median of 7 such loops, rows interleaved round by round so a slow spell of
the CPU hits every row alike. SDPA's public call is beside the bridge's. The pieces:
* public fwd+bwd / fwd (no grad) / fwd with grad (the graph dropped unrun): transformers' call as a model makes it;
* kernel_launches.forward / kernel_launches.backward: the launchers alone, called from the main thread (no
  autograd);
* kernel_launches.backward from the autograd engine: the same launcher run inside a trivial autograd Function's
  backward, so the engine's hand-off to its device thread and back is included;
* nop Function fwd+bwd: that Function with an empty backward (the engine's own cost for a Python node);
* launches only: the call's recorded kernel launches replayed through `launch.launch` with the same arguments (all
  of them, or the backward's);
* allocations: the call's output and gradient buffers (torch.empty of each);
* "backward on the calling thread": the public call with `torch.autograd.set_multithreading_enabled(False)`, so
  the engine runs the backward in the caller's thread (no hand-off to its device thread);
* "ready grads": the public call with kernel_launches.backward replaced by one that returns gradients made
  beforehand (what autograd and the Function cost around the launchers); "fresh grads, no launches" allocates them
  instead, and "backward's launches, ready grads" replays the backward's recorded launches before returning the
  ready ones;
* "autograd.grad": the public call's backward through torch.autograd.grad (no AccumulateGrad nodes);
* "calls per backward": LAYERS calls on their own leaves and one backward for all of them, as a model's layers run.
Also the wall time of kernel_launches.backward measured inside the engine's thread, against the same call from the
main thread.
BENCH_BASELINE=DIR (another checkout's bridge/src): its public calls join the rounds as "baseline ..." rows, loaded
in this process under another package name, so the two trees are timed side by side by the same CPU.
BENCH_SHAPES=2x2048,8x1024 (default both), BENCH_LOOPS (default 7); results in $OUT/host_time.json and .md.
BENCH_PROFILE=1 also writes $OUT/host_profile-<shape>.txt: cProfile of the public fwd+bwd with the backward on the
calling thread (cProfile sees one thread), functions by own time and by cumulative time.
"""

from __future__ import annotations

import cProfile
import importlib
import io
import json
import os
import pathlib
import pstats
import shutil
import statistics
import sys
import tempfile
import time

import torch
from common import call_inputs, load_sglang, pass_through_function

OUT = os.environ.get("OUT", "out")
SHAPES = {"2x2048": (2, 2048, 32, 8, 128), "8x1024": (8, 1024, 32, 8, 128)}
SPIN_PER_MS = 2_000_000
CALLS, LOOPS, LAYERS = 30, int(os.environ.get("BENCH_LOOPS", "7")), 6


def load_baseline(src: str):
    """The package in `src` as `sglang_attn_bridge_baseline` (its custom ops renamed to match), or None."""
    if not src:
        return None
    root = pathlib.Path(tempfile.mkdtemp())
    dst = root / "sglang_attn_bridge_baseline"
    shutil.copytree(pathlib.Path(src) / "sglang_attn_bridge", dst)
    for py in dst.rglob("*.py"):
        py.write_text(py.read_text().replace("sglang_attn_bridge::", "sglang_attn_bridge_baseline::"))
    sys.path.insert(0, str(root))
    return importlib.import_module("sglang_attn_bridge_baseline.attention")


def loop_us(fn) -> float:
    """CPU us to queue one call: CALLS calls behind a spin (none waits for the GPU). A fn that makes several calls
    says how many (`fn.calls`): it runs CALLS // fn.calls times, and the time is per call."""
    per = getattr(fn, "calls", 1)
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_PER_MS * 3 * CALLS)
    t0 = time.perf_counter()
    for _ in range(CALLS // per):
        fn()
    dt = (time.perf_counter() - t0) / (CALLS // per * per)
    torch.cuda.synchronize()
    return dt * 1e6


def pieces(b, s, hq, hkv, d, baseline=None) -> dict:
    from sglang_attn_bridge import kernel_launches, launch
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from sglang_attn_bridge.scoring import Scoring
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    q, k, v, do, mod, kw, lay = call_inputs("x", b, s, hq, hkv, d)
    scale = d**-0.5
    qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
    o, lse = kernel_launches.forward(qt, kt, vt, lay, Scoring(scale, True))

    def public(f, grad=True, backward=True, threads=True, via_grad=False):
        def run():
            with torch.set_grad_enabled(grad):
                out, _ = f(mod, q, k, v, None, scaling=scale, dropout=0.0, **kw)
            if via_grad:
                torch.autograd.grad(out, (q, k, v), do)
            elif backward:
                with torch.autograd.set_multithreading_enabled(threads):
                    out.backward(do)
                q.grad = k.grad = v.grad = None

        return run

    def layers(f, n=LAYERS):
        """n calls on n sets of leaves, one backward for all: a model's layers, whose backward nodes the engine runs
        one after another in its device thread (so its hand-off to that thread is paid once per backward)."""
        sets = [tuple(t.detach().clone().requires_grad_(True) for t in (q, k, v)) for _ in range(n)]

        def run():
            outs = [f(mod, *qkv, None, scaling=scale, dropout=0.0, **kw)[0] for qkv in sets]
            torch.autograd.backward(outs, [do] * n)
            for t in (t for qkv in sets for t in qkv):
                t.grad = None

        run.calls = n
        return run

    ready = kernel_launches.backward(do, qt, kt, vt, o, lse, lay, Scoring(scale, True))

    def with_backward(run, fake):
        """run() with kernel_launches.backward replaced by fake() (what the engine thread does around the real one)."""

        def swapped():
            real_backward = kernel_launches.backward
            kernel_launches.backward = lambda *a, **kw: fake()
            try:
                run()
            finally:
                kernel_launches.backward = real_backward

        return swapped

    def fresh_grads():
        torch.empty_like(lse)
        return torch.empty_like(qt), torch.empty_like(kt), torch.empty_like(vt)

    engine_s: list = []

    def timed_backward():
        t0 = time.perf_counter()
        kernel_launches.backward(do, qt, kt, vt, o, lse, lay, Scoring(scale, True))
        engine_s.append(time.perf_counter() - t0)

    ViaEngine, Nop = pass_through_function(timed_backward), pass_through_function(lambda: None)

    x = torch.zeros(1, device="cuda", requires_grad=True)
    seed = torch.ones(1, device="cuda")

    def via(fn_cls):
        def run():
            fn_cls.apply(x).backward(seed)
            x.grad = None

        return run

    recorded: list = []
    real = kernel_launches.launch

    def record(fn, grid, args, kwargs, sig=None):
        recorded.append((fn, grid, args, kwargs, sig))
        real(fn, grid, args, kwargs, sig)

    kernel_launches.launch = record
    try:
        kernel_launches.forward(qt, kt, vt, lay, Scoring(scale, True))
        n_fwd = len(recorded)
        kernel_launches.backward(do, qt, kt, vt, o, lse, lay, Scoring(scale, True))
    finally:
        kernel_launches.launch = real

    def launches(which=slice(None)):
        for fn, grid, args, kwargs, sig in recorded[which]:
            launch.launch(fn, grid, args, kwargs, sig)

    def launched_ready_grads():
        launches(slice(n_fwd, None))
        return ready

    shapes = [o.shape, lse.shape, qt.shape, kt.shape, vt.shape, lse.shape]

    def allocs():
        for shp in shapes:
            torch.empty(shp, device="cuda", dtype=torch.bfloat16)

    main_s: list = []

    def backward_main():
        t0 = time.perf_counter()
        kernel_launches.backward(do, qt, kt, vt, o, lse, lay, Scoring(scale, True))
        main_s.append(time.perf_counter() - t0)

    runs = {
        "sdpa public fwd+bwd": public(sdpa_attention_forward),
        "bridge public fwd+bwd": public(triton_attention_forward),
        "sdpa public fwd, no grad": public(sdpa_attention_forward, grad=False, backward=False),
        "bridge public fwd, no grad": public(triton_attention_forward, grad=False, backward=False),
        "bridge public fwd, with grad (no bwd)": public(triton_attention_forward, backward=False),
        f"sdpa public fwd+bwd, {LAYERS} calls per backward (per call)": layers(sdpa_attention_forward),
        f"bridge public fwd+bwd, {LAYERS} calls per backward (per call)": layers(triton_attention_forward),
        "sdpa public fwd+bwd, backward on the calling thread": public(sdpa_attention_forward, threads=False),
        "bridge public fwd+bwd, backward on the calling thread": public(triton_attention_forward, threads=False),
        "bridge public fwd+bwd, ready grads": with_backward(public(triton_attention_forward), lambda: ready),
        "bridge public fwd+bwd, fresh grads, no launches": with_backward(public(triton_attention_forward), fresh_grads),
        "bridge public fwd+bwd, backward's launches, ready grads": with_backward(
            public(triton_attention_forward), launched_ready_grads
        ),
        "bridge public fwd+bwd via autograd.grad": public(triton_attention_forward, via_grad=True),
        "kernel_launches.forward": lambda: kernel_launches.forward(qt, kt, vt, lay, Scoring(scale, True)),
        "kernel_launches.backward (main thread)": backward_main,
        "kernel_launches.backward from the autograd engine": via(ViaEngine),
        "nop Function fwd+bwd": via(Nop),
        f"launches only ({len(recorded)})": launches,
        f"backward's launches only ({len(recorded) - n_fwd})": lambda: launches(slice(n_fwd, None)),
        f"allocations only ({len(shapes)})": allocs,
    }
    if baseline is not None:
        runs["baseline public fwd+bwd"] = public(baseline.triton_attention_forward)
        runs[f"baseline public fwd+bwd, {LAYERS} calls per backward (per call)"] = layers(
            baseline.triton_attention_forward
        )
        runs["baseline public fwd, no grad"] = public(baseline.triton_attention_forward, grad=False, backward=False)
    for fn in runs.values():
        for _ in range(3):
            fn()
    print("python threads after warm-up:", [t.name for t in __import__("threading").enumerate()], flush=True)
    samples: dict = {name: [] for name in runs}
    main_s.clear()
    engine_s.clear()
    for _ in range(LOOPS):
        for name, fn in runs.items():
            samples[name].append(loop_us(fn))
    row = {name: statistics.median(t) for name, t in samples.items()}
    row["kernel_launches.backward wall inside the engine thread"] = statistics.median(engine_s) * 1e6
    row["kernel_launches.backward wall on the main thread"] = statistics.median(main_s) * 1e6
    if os.environ.get("BENCH_PROFILE"):
        profile(public(triton_attention_forward, threads=False), f"{b}x{s}")
    return row


def profile(run, name: str, batches: int = 12) -> None:
    """cProfile of batches of CALLS runs, each batch behind a GPU spin (so no launch waits for room in the queue),
    written by own and by cumulative time."""
    prof = cProfile.Profile()
    for _ in range(batches):
        torch.cuda.synchronize()
        torch.cuda._sleep(SPIN_PER_MS * 3 * CALLS)
        prof.enable()
        for _ in range(CALLS):
            run()
        prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    for order in ("tottime", "cumulative"):
        pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(45)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"host_profile-{name}.txt"), "w") as f:
        f.write(buf.getvalue())


def main() -> int:
    load_sglang()
    import threading

    print("python threads:", [t.name for t in threading.enumerate()], "native:", len(os.listdir("/proc/self/task")))
    baseline = load_baseline(os.environ.get("BENCH_BASELINE", ""))
    wanted = os.environ.get("BENCH_SHAPES", ",".join(SHAPES)).split(",")
    rows = {}
    for name in wanted:
        rows[name] = pieces(*SHAPES[name], baseline=baseline)
        print(name, json.dumps(rows[name], indent=1), flush=True)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "host_time.json"), "w") as f:
        json.dump(rows, f, indent=1)
    names = list(next(iter(rows.values())))
    lines = ["| piece (host us) | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    lines += [f"| {n} | " + " | ".join(f"{rows[r][n]:.0f}" for r in rows) + " |" for n in names]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(OUT, "host_time.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
