"""What autograd's hand-off to its device thread costs a Python backward, on the GPU machine.

A pass-through autograd Function whose backward runs a fixed body (k launches of an empty Triton kernel through
`launch.launch`, k in-place torch adds, k allocations, or a busy wait of N us) is timed three ways: fwd+bwd with the
backward in the engine's device thread (the default for CUDA tensors), fwd+bwd with the backward on the calling
thread (`torch.autograd.set_multithreading_enabled(False)`), and the body alone. CPU us per call (host_time.py's
`loop_us`: 30 calls behind a GPU spin), median of 9 interleaved loops. Prints a table; the Python threads alive are
printed too (a second Python thread would contend for the GIL).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

import torch
import triton
from common import pass_through_function
from host_time import loop_us
from sglang_attn_bridge import launch

LOOPS = 9


@triton.jit
def nop_kernel(x, n):
    pass


def main() -> int:
    buf = torch.zeros(16, device="cuda")
    x = torch.zeros(1, device="cuda", requires_grad=True)
    seed = torch.ones(1, device="cuda")

    def repeat(k, once):
        def body():
            for _ in range(k):
                once()

        return body

    def busy(us):
        def body():
            end = time.perf_counter() + us * 1e-6
            while time.perf_counter() < end:
                pass

        return body

    bodies = {
        f"triton launches x{k}": repeat(k, lambda: launch.launch(nop_kernel, (1,), (buf, 3), {}, ("nop",)))
        for k in (0, 1, 3, 6)
    }
    for k in (3, 6):
        bodies[f"torch add_ x{k}"] = repeat(k, lambda: buf.add_(1.0))
        bodies[f"torch.empty x{k}"] = repeat(k, lambda: torch.empty(4096, device="cuda"))
    for us in (10, 30, 60, 100, 150, 250):
        bodies[f"busy {us} us"] = busy(us)

    runs = {}
    for name, body in bodies.items():
        fn = pass_through_function(body)

        def engine(fn=fn):
            fn.apply(x).backward(seed)
            x.grad = None

        def calling(fn=fn):
            with torch.autograd.set_multithreading_enabled(False):
                fn.apply(x).backward(seed)
            x.grad = None

        runs[name + " | engine"] = engine
        runs[name + " | calling thread"] = calling
        runs[name + " | body alone"] = body

    for fn in runs.values():
        for _ in range(3):
            fn()
    samples: dict = {name: [] for name in runs}
    for _ in range(LOOPS):
        for name, fn in runs.items():
            samples[name].append(loop_us(fn))
    print("switchinterval", sys.getswitchinterval(), "threads", [t.name for t in threading.enumerate()])
    for name in runs:
        print(f"{name:45s} {statistics.median(samples[name]):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
