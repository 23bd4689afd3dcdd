"""(d) Memory: what one attention call holds and peaks at, the bridge's public call beside SDPA's.

Per shape and implementation, MiB beyond the inputs: the peak during the forward (autograd recording, as in
training), what stays allocated from the forward until the backward (the output and what is saved for the
backward: a model holds this for every layer until its backward), and the peak during the backward. Writes
memory.json and memory.md.
"""

from __future__ import annotations

import sys

import harness as h
import torch

MIB = 2**20


def measure(call, impl: str) -> dict:
    fwd = h.public(impl, call, backward=False)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fwd()
    torch.cuda.synchronize()
    row = {"fwd peak": (torch.cuda.max_memory_allocated() - base) / MIB}
    row["held for bwd"] = (torch.cuda.memory_allocated() - base) / MIB
    torch.cuda.reset_peak_memory_stats()
    out.backward(call.do)
    torch.cuda.synchronize()
    row["bwd peak"] = (torch.cuda.max_memory_allocated() - base) / MIB
    call.q.grad = call.k.grad = call.v.grad = None
    del out
    return row


def table(meta, rows) -> str:
    keys = ("fwd peak", "held for bwd", "bwd peak")
    lines = [h.header(meta), "", "MiB beyond the inputs (the bwd peak counts what the forward left, and dq/dk/dv)", ""]
    lines += ["| shape | inputs MiB | " + " | ".join(f"{k} (bridge / SDPA)" for k in keys) + " |"]
    lines += ["|---|---|" + "---|" * len(keys)]
    for r in rows:
        b, s = r.get("bridge", {}), r.get("sdpa", {})
        cells = " | ".join(f"{h.fmt(b.get(k), '.0f')} / {h.fmt(s.get(k), '.0f')}" for k in keys)
        lines.append(f"| {r['shape']} | {h.fmt(r.get('inputs MiB'), '.0f')} | {cells} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = h.parser(__doc__)
    p.add_argument("--shapes", help="comma-separated parts of shape names (default: every shape)")
    a = p.parse_args(argv)
    meta = h.setup()
    rows = []
    for shape in h.pick_shapes(a.shapes):
        call = h.inputs(shape)
        row = {"shape": shape.name}
        row["inputs MiB"] = sum(x.numel() * x.element_size() for x in (call.q, call.k, call.v, call.do)) / MIB
        for impl in ("bridge", "sdpa"):
            try:
                h.public(impl, call, True)()  # compiled and probed outside the measurement
                row[impl] = measure(call, impl)
            except Exception as e:  # keep the other numbers
                row[impl] = {"error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        print(row, flush=True)
        del call
        torch.cuda.empty_cache()
    h.write(a.out, "memory", {"meta": meta, "rows": rows}, table(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
