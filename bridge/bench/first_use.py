"""(b) First use: what the first public call of a configuration class costs in a fresh process.

Each class runs in child processes: `cold` with an empty Triton cache (a new install: every kernel compiles, and
the first-use probe runs), then `warm` with the cache that run left (a later process of the same install: kernels
load from disk; the probe runs again unless SGLANG_ATTN_BRIDGE_PROBE_CACHE keeps its decisions). A child times
the imports and register(), CUDA's start, SDPA's first public fwd+bwd, the bridge's first and second public
fwd+bwd, and reports the probe's decisions. Writes first_use.json and first_use.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import harness as h

CLASSES = {  # name -> (shape, dtype)
    "bf16 D128": ("2x2048 32/8 D128", "bfloat16"),
    "bf16 D64": ("4x4096 32/8 D64", "bfloat16"),
    "fp32 D128": ("2x2048 32/8 D128", "float32"),
}


def child(cls: str) -> dict:
    t = time.perf_counter()
    import torch

    h.setup(describe=False)
    out = {"import + register s": time.perf_counter() - t}
    shape, dtype = h.SHAPES[CLASSES[cls][0]], getattr(torch, CLASSES[cls][1])

    def timed(key, fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out[key] = time.perf_counter() - t0

    timed("cuda start s", lambda: torch.zeros(1, device="cuda"))
    call = h.inputs(shape, dtype=dtype)
    timed("sdpa first fwd+bwd s", h.public("sdpa", call, True))
    bridge = h.public("bridge", call, True)
    timed("bridge first fwd+bwd s", bridge)
    timed("bridge second fwd+bwd s", bridge)
    from sglang_attn_bridge import probe

    out["probe"] = [d.reason for d in probe._decisions.values()]
    return out


def table(meta, rows) -> str:
    keys = ["import + register s", "cuda start s", "sdpa first fwd+bwd s", "bridge first fwd+bwd s"]
    keys += ["bridge second fwd+bwd s", "process s"]
    lines = [h.header(meta), "", "| class | cache | " + " | ".join(keys) + " | probe |", "|---" * (len(keys) + 3) + "|"]
    for r in rows:
        cells = " | ".join(h.fmt(r.get(k), ".2f") for k in keys)
        lines.append(f"| {r['class']} | {r['state']} | {cells} | {r.get('probe', r.get('error', ''))} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = h.parser(__doc__)
    p.add_argument("--classes", default="bf16 D128,bf16 D64", help=f"comma-separated, of: {', '.join(CLASSES)}")
    p.add_argument("--child", help=argparse.SUPPRESS)  # the class to time, in a child process
    a = p.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child)), flush=True)
        return 0
    meta = h.setup()
    rows = []
    cache = tempfile.mkdtemp(prefix="triton_first_use_")
    for cls in a.classes.split(","):
        for state in ("cold", "warm"):
            env = {
                **os.environ,
                "TRITON_CACHE_DIR": os.path.join(cache, cls.replace(" ", "_")),
                "PYTHONUNBUFFERED": "1",
            }
            env.pop("SGLANG_ATTN_BRIDGE_PROBE_CACHE", None)
            t0 = time.perf_counter()
            run = subprocess.run([sys.executable, __file__, "--child", cls], env=env, capture_output=True, text=True)
            line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
            row = json.loads(line[7:]) if line else {"error": (run.stderr or run.stdout)[-800:]}
            row.update({"class": cls, "state": state, "process s": time.perf_counter() - t0})
            rows.append(row)
            print(json.dumps(row), flush=True)
    h.write(a.out, "first_use", {"meta": meta, "rows": rows}, table(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
