"""Long calls on the GPU: the public path's fwd+bwd under kernel-config variants, device time, side by side.

Per long shape, the registered attention function (q/k [B, H, S, D] contiguous, v a transposed view) runs fwd+bwd
under the committed config and under each variant (one field group of `config.py` changed), in interleaved rounds
with every call queued behind a GPU spin (`common.interleaved_ms(device_only=True)`: device time, no host gaps), and
SDPA's fwd+bwd beside them. Each variant's forward output is compared with sglang's kernel (must be equal: the
forward's bits are fixed) and its dq/dk/dv with the committed config's (max abs difference; 0 where the variant
only reorders work, not sums). Results in $OUT/bench_long.json and .md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace

import torch
from common import call_inputs, interleaved_ms, report_sglang, write_text

OUT = os.environ.get("OUT", "out")
SHAPES = [  # (name, batch, seq, hq, hkv, d); packed: one row of `batch` sequences
    ("1x8192 32/8 D128", 1, 8192, 32, 8, 128),
    ("4x4096 32/8 D128", 4, 4096, 32, 8, 128),
    ("4x4096 16/16 D128", 4, 4096, 16, 16, 128),
    ("4x4096 32/8 D64", 4, 4096, 32, 8, 64),
    ("packed 26 seqs=18432 32/8 D128", 26, 18432, 32, 8, 128),
]


def variants(d):
    """name -> (fwd changes, bwd changes) applied to the committed config of head dim d."""
    from sglang_attn_bridge import config

    fw, bw = config.GPU_FWD[d], config.GPU_BWD[d]
    out = {"committed": ({}, {})}
    if bw.gluon_dq:
        out["Triton dQ"] = ({}, dict(gluon_dq=()))
        out["dQ deferred"] = ({}, dict(gluon_dq_defer=not bw.gluon_dq_defer))
        out["dQ no pairs"] = ({}, dict(gluon_dq_pairs=not bw.gluon_dq_pairs))
        out["dQ 128x64 w8"] = ({}, dict(gluon_dq=(128, 64, 8)))
        out["one stream"] = ({}, dict(overlap=False))
    return {k: (replace(fw, **f), replace(bw, **b)) for k, (f, b) in out.items()}


def main() -> int:
    from sglang_attn_bridge import config
    from sglang_attn_bridge.hf_attention import triton_attention_forward
    from sglang_attn_bridge.scoring import Scoring
    from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    report_sglang()
    kern = resolve(refresh=True).kernel
    os.makedirs(OUT, exist_ok=True)
    rows = []
    only = os.environ.get("BENCH_SHAPES")
    for name, b, s, hq, hkv, d in SHAPES:
        if only and not any(o in name for o in only.split(",")):
            continue
        t0 = time.time()
        q, k, v, do, mod, kw, lay = call_inputs(name, b, s, hq, hkv, d)
        packed = name.startswith("packed")
        ref = None
        if kern is not None:
            with torch.no_grad():
                qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
                ref = sglang_forward(kern, qt, kt, vt, lay, Scoring(d**-0.5, True))

        def both(f, kw=kw):
            def run():
                out, _ = f(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)
                out.backward(do)
                q.grad = k.grad = v.grad = None

            return run

        base = (config.GPU_FWD[d], config.GPU_BWD[d])
        row = {"shape": name, "checks": {}}
        runs = {} if packed else {"sdpa": both(sdpa_attention_forward)}
        grads0 = None
        for vname, (fc, bc) in variants(d).items():
            config.GPU_FWD[d], config.GPU_BWD[d] = fc, bc  # kept objects: the plan cache keys on their ids
            try:
                out, _ = triton_attention_forward(mod, q, k, v, None, scaling=d**-0.5, dropout=0.0, **kw)
                out.backward(do)
                grads = [x.grad.clone() for x in (q, k, v)]
                q.grad = k.grad = v.grad = None
                chk = {"fwd equals sglang": None if ref is None else bool(torch.equal(out.detach(), ref))}
                if grads0 is None:
                    grads0 = grads
                else:
                    for gname, a, g in zip(("dq", "dk", "dv"), grads0, grads):
                        chk[f"{gname} max diff"] = (a.float() - g.float()).abs().max().item()
                row["checks"][vname] = chk

                call = both(triton_attention_forward)

                def run(fc=fc, bc=bc, f=call):
                    config.GPU_FWD[d], config.GPU_BWD[d] = fc, bc  # a dict store: outside the events' span
                    f()

                runs[vname] = run
            except Exception as e:
                row["checks"][vname] = f"{type(e).__name__}: {str(e)[:300]}"
                q.grad = k.grad = v.grad = None
            finally:
                config.GPU_FWD[d], config.GPU_BWD[d] = base
        times = interleaved_ms(runs, rounds=8, reps=5, warmup=3, device_only=True)
        config.GPU_FWD[d], config.GPU_BWD[d] = base
        row["device ms"] = {
            k_: (t if isinstance(t, float) else f"{type(t).__name__}: {str(t)[:200]}") for k_, t in times.items()
        }
        row["s"] = time.time() - t0
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(OUT, "bench_long.json"), "w") as f:
            json.dump(rows, f, indent=1)
    lines = ["device ms of one public fwd+bwd (interleaved, behind a spin); x = committed / variant; sdpa beside", ""]
    for r in rows:
        t = r["device ms"]
        c = t.get("committed")
        lines.append(f"{r['shape']}" + (f"  (sdpa {t['sdpa']:.3f})" if isinstance(t.get("sdpa"), float) else ""))
        for vname, val in t.items():
            if vname == "sdpa":
                continue
            chk = r["checks"].get(vname)
            x = f" {c / val:.3f}x" if isinstance(val, float) and isinstance(c, float) else ""
            sd = (
                f" sdpa/this {t['sdpa'] / val:.3f}"
                if isinstance(val, float) and isinstance(t.get("sdpa"), float)
                else ""
            )
            vs = f"{val:.3f}" if isinstance(val, float) else str(val)
            lines.append(f"    {vname:32} {vs}{x}{sd}  {json.dumps(chk)}")
    text = "\n".join(lines)
    write_text(os.path.join(OUT, "bench_long.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
