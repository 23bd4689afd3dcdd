"""Where the time of a short public attention call goes: CPU microseconds to queue each piece (the GPU kept busy
by a long spin first, so no launch ever waits for it), and the device time of each kernel of one public fwd+bwd
call (torch.profiler). Prints two tables; writes launch_cost.json under $OUT."""

from __future__ import annotations

import json
import os
import statistics
import time

import torch
import triton
import triton.language as tl
from common import load_sglang

OUT = os.environ.get("OUT", "out")


@triton.jit
def _tiny(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def cpu_us(fn, reps=40):
    """Median CPU time to queue fn, with the GPU busy behind a spin (so queueing never blocks)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU spin: everything below only queues
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main():
    os.makedirs(OUT, exist_ok=True)
    load_sglang()
    from sglang_attn_bridge import kernel_launches, layout, probe, register
    from sglang_attn_bridge.forward_selection import select_forward
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from sglang_attn_bridge.scoring import Scoring

    register()

    class Mod(torch.nn.Module):
        is_causal = True

    mod = Mod()
    res = {"cpu_us": {}, "kernels": {}}
    for shape in ((2, 2048, 32, 8, 128), (1, 8192, 32, 8, 128)):
        b, s, hq, hkv, d = shape
        name = f"{b}x{s} {hq}/{hkv} D{d}"
        q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).detach().requires_grad_()
        do = torch.randn(b, s, hq, d, device="cuda", dtype=torch.bfloat16)
        qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
        lay = layout.dense(b, s, s, q.device)
        o, lse = kernel_launches.forward(qt, kt, vt, lay, Scoring(d**-0.5, True))
        x = torch.zeros(1024, device="cuda")

        def public():
            out, _ = triton_attention_forward(mod, q, k, v, None, scaling=d**-0.5)
            out.backward(do)
            q.grad = k.grad = v.grad = None

        def public_fwd():
            with torch.no_grad():
                triton_attention_forward(mod, q, k, v, None, scaling=d**-0.5)

        pieces = {
            "public fwd+bwd (auto)": public,
            "public fwd, no grad": public_fwd,
            "kernel_launches.forward (gluon)": lambda: kernel_launches.forward(qt, kt, vt, lay, Scoring(d**-0.5, True)),
            "kernel_launches.forward (triton)": lambda: kernel_launches.forward(
                qt, kt, vt, lay, Scoring(d**-0.5, True), gluon=False
            ),
            "kernel_launches.backward": lambda: kernel_launches.backward(
                do, qt, kt, vt, o, lse, lay, Scoring(d**-0.5, True)
            ),
            "kernel_launches.backward dkdv only": lambda: kernel_launches.backward(
                do, qt, kt, vt, o, lse, lay, Scoring(d**-0.5, True), parts=("dkdv",)
            ),
            "kernel_launches.backward dq only": lambda: kernel_launches.backward(
                do, qt, kt, vt, o, lse, lay, Scoring(d**-0.5, True), parts=("dq",)
            ),
            "select_forward (auto)": lambda: select_forward(qt, kt, vt, Scoring(d**-0.5, True)),
            "probe.class_of": lambda: probe.class_of(qt, kt, vt, Scoring(d**-0.5, True)),
            "layout.dense": lambda: layout.dense(b, s, s, q.device),
            "tiny triton launch": lambda: _tiny[(1,)](x, 1024, BLOCK=1024),
            "torch.empty x4": lambda: [torch.empty(b, s, hq, d, device="cuda") for _ in range(4)],
            "q.contiguous()": lambda: qt.contiguous(),
        }
        res["cpu_us"][name] = {k_: cpu_us(f) for k_, f in pieces.items()}
        for k_, us in res["cpu_us"][name].items():
            print(f"{name:22} {k_:28} {us:8.1f} us", flush=True)

        public()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                public()
            torch.cuda.synchronize()
        ker = {}
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA or getattr(e, "self_device_time_total", 0):
                ker[e.key[:60]] = (e.count, getattr(e, "self_device_time_total", 0) / 5)
        res["kernels"][name] = ker
        total = sum(t for _, t in ker.values())
        print(f"{name}: device us per public fwd+bwd call, by kernel (total {total:.0f})")
        for k_, (n, t) in sorted(ker.items(), key=lambda kv: -kv[1][1])[:14]:
            print(f"   {t:8.1f}  x{n // 5:<3} {k_}", flush=True)
    with open(os.path.join(OUT, "launch_cost.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
