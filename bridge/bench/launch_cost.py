"""(c) Launch cost: the CPU time to queue one call, the public call taken apart, and the device time by kernel.

Per shape (default the two short ones, where the CPU's work sits near the device's, and 1x8192): CPU us to queue
each piece with the GPU kept busy by a spin first (harness.busy_host_us: 30 calls back to back, median of 7 loops
interleaved across the pieces) — the public calls of the bridge and SDPA, the bridge's with its backward on the
calling thread (no hand-off to autograd's device thread) and through Triton's own launch path (direct_launch=0),
its launchers alone, an empty Python autograd Function (what the engine charges any Python backward) and one tiny
Triton launch; then the device us of each kernel of one public fwd+bwd call (torch.profiler, 5 calls).
--cprofile also writes cprofile-<shape>.txt (the bridge's public fwd+bwd, backward on the calling thread).
Writes launch_cost.json and launch_cost.md.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys

import harness as h
import torch
import triton
import triton.language as tl


@triton.jit
def _tiny(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class _Nop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


def pieces(call) -> dict:
    from sglang_attn_bridge import kernel_launches
    from sglang_attn_bridge.scoring import Scoring

    qt, kt, vt = (x.detach().transpose(1, 2) for x in (call.q, call.k, call.v))
    lay, sc = call.layout(), Scoring(call.shape.d**-0.5, True)
    o, lse = kernel_launches.forward(qt, kt, vt, lay, sc)
    do = call.do
    bridge = h.public("bridge", call, True)
    x, seed, buf = (torch.zeros(1, device="cuda", requires_grad=True), torch.ones(1, device="cuda"), torch.zeros(1024))
    buf = buf.cuda()

    def calling_thread():
        with torch.autograd.set_multithreading_enabled(False):
            bridge()

    def nop():
        _Nop.apply(x).backward(seed)
        x.grad = None

    return {
        "bridge public fwd+bwd": bridge,
        "sdpa public fwd+bwd": h.public("sdpa", call, True),
        "bridge public fwd, no grad": h.public("bridge", call, False, grad=False),
        "sdpa public fwd, no grad": h.public("sdpa", call, False, grad=False),
        "bridge public fwd+bwd, backward on the calling thread": calling_thread,
        "bridge public fwd+bwd, Triton's launch path": h.public("bridge", call, True, variant={"direct_launch": False}),
        "kernel_launches.forward": lambda: kernel_launches.forward(qt, kt, vt, lay, sc),
        "kernel_launches.backward": lambda: kernel_launches.backward(do, qt, kt, vt, o, lse, lay, sc),
        "empty autograd Function fwd+bwd": nop,
        "one tiny Triton launch": lambda: _tiny[(1,)](buf, 1024, BLOCK=1024),
    }


def kernels_us(fn, calls: int = 5) -> dict:
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return {e.key[:80]: e.self_device_time_total / calls for e in prof.key_averages() if e.self_device_time_total > 0}


def cprofile(fn, path: str, calls: int = 30) -> None:
    for _ in range(3):
        fn()
    prof = cProfile.Profile()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(3000 * calls * h.SPIN_PER_US))
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    for order in ("tottime", "cumulative"):
        pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(40)
    with open(path, "w") as f:
        f.write(buf.getvalue())


def table(meta, rows) -> str:
    names = list(next(iter(rows.values()))["host_us"])
    lines = [h.header(meta), "", "CPU us to queue one call, the GPU kept busy", ""]
    lines += ["| piece | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    lines += [f"| {n} | " + " | ".join(h.fmt(r["host_us"].get(n), ".0f") for r in rows.values()) + " |" for n in names]
    for shape, r in rows.items():
        for impl in ("bridge", "sdpa"):
            ker = r[f"{impl} kernels us"]
            lines += ["", f"{shape}: {impl} public fwd+bwd, device us by kernel (total {sum(ker.values()):.0f})", ""]
            lines += [f"    {us:8.1f}  {k}" for k, us in sorted(ker.items(), key=lambda kv: -kv[1])[:12]]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = h.parser(__doc__)
    p.add_argument("--shapes", default="2x2048,8x1024,1x8192", help="comma-separated parts of shape names")
    p.add_argument("--loops", type=int, default=7)
    p.add_argument("--cprofile", action="store_true")
    a = p.parse_args(argv)
    meta = h.setup()
    rows = {}
    for shape in h.pick_shapes(a.shapes):
        call = h.inputs(shape)
        runs = pieces(call)
        rows[shape.name] = {"host_us": h.busy_host_us(runs, loops=a.loops)}
        for impl in ("bridge", "sdpa"):
            rows[shape.name][f"{impl} kernels us"] = kernels_us(runs[f"{impl} public fwd+bwd"])
        if a.cprofile:
            os.makedirs(a.out, exist_ok=True)
            path = os.path.join(a.out, f"cprofile-{shape.name.split()[0]}.txt")
            cprofile(runs["bridge public fwd+bwd, backward on the calling thread"], path)
        print(shape.name, rows[shape.name], flush=True)
    h.write(a.out, "launch_cost", {"meta": meta, "rows": rows}, table(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
