#!/bin/bash
# One device call: the GPU tests (bits, gradients, determinism, the Gluon dQ's bits under every variant), the
# candidates' bits 5x, then every candidate timed side by side with the committed config and SDPA. Run from the tree's
# root (the carried copy of the worktree); results in $OUT.
set -o pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/bridge/src PYTHONUNBUFFERED=1 SGLANG_WHEEL=$(ls $PWD/.whl/sglang-*.whl | tail -1)
R=${OUT:-out}; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv; python3 -c "import torch,triton,transformers,sys;print(sys.version.split()[0],torch.__version__,torch.version.cuda,triton.__version__,transformers.__version__)"; cat COMMIT 2>/dev/null; } > $R/gpu.txt 2>&1
cat $R/gpu.txt
(cd bridge && TRITON_INTERPRET=0 timeout 300 python3 -m pytest tests/gpu -m gpu -n 8 -p no:cacheprovider -q -rfEs 2>&1) | tee $R/gpu-tests.log | tail -15
D128V=(--variant "dq 2 heads:gluon_dq_heads=2" --variant "dq 2 heads no pairs:gluon_dq_heads=2,gluon_dq_pairs=False")
D64V=(--variant "dq 2 heads:gluon_dq_heads=2" --variant "dkdv pairs:gluon_pairs=True" --variant "dq 64x128:gluon_dq=(64,128,4)")
timeout 200 python3 bridge/bench/bwd_bits.py --shapes "1x8192,4x4096 32/8 D128,packed,2x2048" "${D128V[@]}" 2>&1 | tee $R/bits.log
timeout 100 python3 bridge/bench/bwd_bits.py --shapes "D64" "${D64V[@]}" 2>&1 | tee -a $R/bits.log
mkdir -p $R/d128 $R/d64
timeout 150 python3 bridge/bench/bench.py speed --out $R/d64 --shapes D64 "${D64V[@]}" 2>&1 | grep -v "^{" | tail -3
timeout 400 python3 bridge/bench/bench.py speed --out $R/d128 --shapes "D128" "${D128V[@]}" 2>&1 | grep -v "^{" | tail -3
python3 - "$R" <<'PY'
import json, sys
for sub in ("d64", "d128"):
    try:
        rows = json.load(open(f"{sys.argv[1]}/{sub}/speed.json"))["rows"]
    except Exception as e:
        print(sub, "no results", e); continue
    for r in rows:
        t = r["times"]
        sd = t.get("sdpa fwd+bwd", {}); sf = t.get("sdpa fwd", {})
        cells = []
        for name, v in t.items():
            if name.startswith("sdpa") or not isinstance(v, dict): continue
            ref = sd if name.endswith("fwd+bwd") else sf
            if name.endswith("fwd") and name != "bridge fwd": continue
            cells.append(f"{name[7:] or 'bridge'}: {v['ms']:.3f}/{v.get('device_ms',0):.3f} ({ref['ms']/v['ms']:.2f}x/{ref.get('device_ms',0)/v.get('device_ms',1):.2f}x)")
        print(r["shape"], "| sdpa", f"{sd.get('ms',0):.3f}/{sd.get('device_ms',0):.3f}", "|", " | ".join(cells))
PY
