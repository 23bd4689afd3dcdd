"""What a new configuration class costs on first use, in a fresh process: the probe (bf16) and the compiles.

Runs itself in child processes: `cold` with an empty Triton cache (a new install: every kernel compiles), then
`warm` with that cache (a later process of the same install: the kernels load from disk, the probe runs again
unless SGLANG_ATTN_BRIDGE_PROBE_CACHE keeps its decisions). Per dtype class (bf16 D128, fp32 D128) it times the
first public fwd+bwd call and a second one, and prints the probe's logged decision. JSON lines on stdout and in
$OUT/cold_first_use.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

OUT = os.environ.get("OUT", "out")
HERE = os.path.dirname(os.path.abspath(__file__))


def child(dtype_name: str) -> dict:
    t_start = time.time()
    import torch
    from common import load_sglang

    load_sglang()
    from sglang_attn_bridge import attention_varlen, probe

    t_import = time.time() - t_start
    dtype = getattr(torch, dtype_name)
    lens = [1500, 1, 547]
    t = sum(lens)
    q = torch.randn(t, 32, 128, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(t, 8, 128, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(t, 8, 128, device="cuda", dtype=dtype, requires_grad=True)
    cu = torch.tensor([0] + lens).cumsum(0).to("cuda", torch.int32)
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.time()
        attention_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu).sum().backward()
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    return {
        "dtype": dtype_name,
        "import s": t_import,
        "first fwd+bwd s": times[0],
        "second fwd+bwd s": times[1],
        "probe": [d.reason for d in probe._decisions.values()],
    }


def main() -> int:
    if len(sys.argv) > 1:
        print("RESULT " + json.dumps(child(sys.argv[1])), flush=True)
        return 0
    os.makedirs(OUT, exist_ok=True)
    rows = []
    cache = tempfile.mkdtemp(prefix="triton_cold_")
    for dtype in ("bfloat16", "float32"):
        for state in ("cold", "warm"):
            env = {**os.environ, "TRITON_CACHE_DIR": os.path.join(cache, dtype), "PYTHONUNBUFFERED": "1"}
            env.pop("SGLANG_ATTN_BRIDGE_PROBE_CACHE", None)
            t0 = time.time()
            out = subprocess.run(
                [sys.executable, os.path.join(HERE, "cold_first_use.py"), dtype],
                env=env,
                capture_output=True,
                text=True,
            )
            line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
            row = json.loads(line[7:]) if line else {"dtype": dtype, "error": (out.stderr or out.stdout)[-800:]}
            row.update(state=state, process_s=time.time() - t0)
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(OUT, "cold_first_use.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
