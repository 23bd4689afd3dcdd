"""The bridge's bench, one entry per question (run on the GPU machine from the repository root):

    PYTHONPATH=bridge/src python3 bridge/bench/bench.py speed       # (a) the speed table against SDPA
    PYTHONPATH=bridge/src python3 bridge/bench/bench.py first-use   # (b) a class's first call: compiles, probe
    PYTHONPATH=bridge/src python3 bridge/bench/bench.py launch      # (c) CPU time to queue a call, by piece
    PYTHONPATH=bridge/src python3 bridge/bench/bench.py memory      # (d) memory of a call
    PYTHONPATH=bridge/src python3 bridge/bench/bench.py all         # (a)-(d), each with its defaults
    PYTHONPATH=bridge/src python3 bridge/bench/bench.py regs SPEC.. # kernel registers/spills for sm_90a, no GPU
    ncu ... python3 bridge/bench/bench.py ncu                       # one profiled fwd+bwd for Nsight Compute

`bench.py ENTRY --help` says what an entry measures and takes. Results go to --out (default $OUT, else ./out) as
<entry>.json and <entry>.md. The timing, shapes and public calls all come from harness.py. sglang's kernel is
loaded from SGLANG_WHEEL or .whl/sglang-*.whl where sglang is not installed (sglang_loader.py); without it the
bits column says None.
"""

from __future__ import annotations

import sys

ENTRIES = {"speed": "speed", "first-use": "first_use", "launch": "launch_cost", "memory": "memory"}


def ncu(argv) -> int:
    """One public fwd+bwd of the bridge at 1x8192 32/8 D128 inside cudaProfilerStart/Stop, compiled and warmed up
    outside it, for Nsight Compute (`ncu --clock-control none --profile-from-start off --section SpeedOfLight
    --section Occupancy --section WarpStateStats python3 bridge/bench/bench.py ncu`: Firecracker machines only)."""
    import harness as h
    import torch

    h.setup(describe=False)
    run = h.public("bridge", h.inputs(h.SHAPES["1x8192 32/8 D128"]), True)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in (*ENTRIES, "all", "regs", "ncu"):
        print(__doc__)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    entry, rest = argv[0], argv[1:]
    if entry == "regs":
        import regs_sm90

        if not rest or rest[0] in ("-h", "--help"):
            print(regs_sm90.__doc__)
            return 0
        return regs_sm90.main(rest)
    if entry == "ncu":
        return ncu(rest)
    import importlib

    rc = 0
    for name in ENTRIES if entry == "all" else (entry,):
        rc |= importlib.import_module(ENTRIES[name]).main(rest) or 0
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
