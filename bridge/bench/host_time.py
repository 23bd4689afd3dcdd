"""Where the CPU time of one short attention call goes, on the GPU machine: the public call taken apart.

Each row is the CPU time to queue one call of the named piece (us): 30 calls back to back behind a GPU spin long
enough that none waits for the GPU, the median of 7 such loops, rows interleaved round by round so a slow spell of
the CPU hits every row alike. SDPA's public call is beside the bridge's. The pieces:
* public fwd+bwd / fwd (no grad) / fwd with grad (the graph dropped unrun): transformers' call as a model makes it;
* ops.forward / ops.backward: the launchers alone, called from the main thread (no autograd);
* ops.backward from the autograd engine: the same launcher run inside a trivial autograd Function's backward, so the
  engine's hand-off to its device thread and back is included;
* nop Function fwd+bwd: that Function with an empty backward (the engine's own cost for a Python node);
* launches only: the call's recorded kernel launches replayed through `launch.launch` with the same arguments;
* allocations: the call's output and gradient buffers (torch.empty of each).
Also the wall time of ops.backward measured inside the engine's thread, against the same call from the main thread.
BENCH_BASELINE=DIR (another checkout's bridge/src): its public calls join the rounds as "baseline ..." rows, loaded
in this process under another package name, so the two trees are timed side by side by the same CPU.
BENCH_SHAPES=2x2048,8x1024 (default both), BENCH_LOOPS (default 7); results in $OUT/host_time.json and .md.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

import torch
from common import call_inputs, load_sglang

OUT = os.environ.get("OUT", "out")
SHAPES = {"2x2048": (2, 2048, 32, 8, 128), "8x1024": (8, 1024, 32, 8, 128)}
SPIN_PER_MS = 2_000_000
CALLS, LOOPS = 30, int(os.environ.get("BENCH_LOOPS", "7"))


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
    """CPU us to queue one call: CALLS calls behind a spin (none waits for the GPU)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_PER_MS * 3 * CALLS)
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    dt = (time.perf_counter() - t0) / CALLS
    torch.cuda.synchronize()
    return dt * 1e6


def pieces(b, s, hq, hkv, d, baseline=None) -> dict:
    from sglang_attn_bridge import launch, ops
    from sglang_attn_bridge.attention import triton_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    q, k, v, do, mod, kw, lay = call_inputs("x", b, s, hq, hkv, d)
    scale = d**-0.5
    qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
    o, lse = ops.forward(qt, kt, vt, lay, scale, True)

    def public(f, grad=True, backward=True):
        def run():
            with torch.set_grad_enabled(grad):
                out, _ = f(mod, q, k, v, None, scaling=scale, dropout=0.0, **kw)
            if backward:
                out.backward(do)
                q.grad = k.grad = v.grad = None

        return run

    engine_s: list = []

    def engine_fn(body):
        """An autograd Function that passes its input through and runs body() in its backward (the engine's thread)."""

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                body()
                return g

        return Fn

    def timed_backward():
        t0 = time.perf_counter()
        ops.backward(do, qt, kt, vt, o, lse, lay, scale, True)
        engine_s.append(time.perf_counter() - t0)

    ViaEngine, Nop = engine_fn(timed_backward), engine_fn(lambda: None)

    x = torch.zeros(1, device="cuda", requires_grad=True)
    seed = torch.ones(1, device="cuda")

    def via(fn_cls):
        def run():
            fn_cls.apply(x).backward(seed)
            x.grad = None

        return run

    recorded: list = []
    real = ops.launch

    def record(fn, grid, args, kwargs, sig=None):
        recorded.append((fn, grid, args, kwargs, sig))
        real(fn, grid, args, kwargs, sig)

    ops.launch = record
    try:
        ops.forward(qt, kt, vt, lay, scale, True)
        ops.backward(do, qt, kt, vt, o, lse, lay, scale, True)
    finally:
        ops.launch = real

    def launches():
        for fn, grid, args, kwargs, sig in recorded:
            launch.launch(fn, grid, args, kwargs, sig)

    shapes = [o.shape, lse.shape, qt.shape, kt.shape, vt.shape, lse.shape]

    def allocs():
        for shp in shapes:
            torch.empty(shp, device="cuda", dtype=torch.bfloat16)

    main_s: list = []

    def backward_main():
        t0 = time.perf_counter()
        ops.backward(do, qt, kt, vt, o, lse, lay, scale, True)
        main_s.append(time.perf_counter() - t0)

    runs = {
        "sdpa public fwd+bwd": public(sdpa_attention_forward),
        "bridge public fwd+bwd": public(triton_attention_forward),
        "sdpa public fwd, no grad": public(sdpa_attention_forward, grad=False, backward=False),
        "bridge public fwd, no grad": public(triton_attention_forward, grad=False, backward=False),
        "bridge public fwd, with grad (no bwd)": public(triton_attention_forward, backward=False),
        "ops.forward": lambda: ops.forward(qt, kt, vt, lay, scale, True),
        "ops.backward (main thread)": backward_main,
        "ops.backward from the autograd engine": via(ViaEngine),
        "nop Function fwd+bwd": via(Nop),
        f"launches only ({len(recorded)})": launches,
        f"allocations only ({len(shapes)})": allocs,
    }
    if baseline is not None:
        runs["baseline public fwd+bwd"] = public(baseline.triton_attention_forward)
        runs["baseline public fwd, no grad"] = public(baseline.triton_attention_forward, grad=False, backward=False)
    for fn in runs.values():
        for _ in range(3):
            fn()
    samples: dict = {name: [] for name in runs}
    main_s.clear()
    engine_s.clear()
    for _ in range(LOOPS):
        for name, fn in runs.items():
            samples[name].append(loop_us(fn))
    row = {name: statistics.median(t) for name, t in samples.items()}
    row["ops.backward wall inside the engine thread"] = statistics.median(engine_s) * 1e6
    row["ops.backward wall on the main thread"] = statistics.median(main_s) * 1e6
    return row


def main() -> int:
    load_sglang()
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
