"""Backward candidates' bits on the GPU: each candidate config's public fwd+bwd run 5 times on bench shapes, every
gradient compared bit for bit across the runs (determinism) and with the committed config's (a candidate meant to
change only the schedule must give the same bits).

    PYTHONPATH=bridge/src python3 bridge/bench/bwd_bits.py --shapes "1x8192,D64,packed" \
        --variant "D64 pairs:gluon_pairs=True" [--variant ...]

Prints one line per (shape, candidate) and exits 1 if any candidate is not repeatable, or differs from the
committed bits where it should not (every candidate here should not). The timing is speed's (bench.py speed).
"""

from __future__ import annotations

import argparse
import sys

import harness as h
import torch


def grads(call, variant) -> list[torch.Tensor]:
    fn = h.attention_fn("bridge")
    q, k, v = call.q, call.k, call.v
    with h.apply_variant(variant or {}, call.shape.d):
        out = fn(call.module, q, k, v, None, scaling=call.shape.d**-0.5, dropout=0.0, **call.kwargs)[0]
        out.backward(call.do)
    g = [x.grad.clone() for x in (q, k, v)]
    q.grad = k.grad = v.grad = None
    return g


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=None)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    h.setup(describe=False)
    bad = 0
    for shape in h.pick_shapes(a.shapes):
        call = h.inputs(shape, seed=11)
        base = grads(call, None)
        for name, var in [("committed", {}), *(h.parse_variant(v) for v in a.variant)]:
            runs = [grads(call, var) for _ in range(a.repeats)]
            repeat = all(torch.equal(x, y) for r in runs[1:] for x, y in zip(runs[0], r))
            same = all(torch.equal(x, y) for x, y in zip(runs[0], base))
            finite = all(torch.isfinite(x).all() for x in runs[0])
            ok = repeat and same and finite
            bad += not ok
            print(
                f"{'ok ' if ok else 'BAD'} {shape.name:34} {name:28} repeatable x{a.repeats}: {repeat}  "
                f"equals committed: {same}  finite: {finite}",
                flush=True,
            )
        torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
