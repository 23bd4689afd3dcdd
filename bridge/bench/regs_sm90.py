"""Registers, spills and shared memory of the bridge kernels compiled for the H200 (sm_90a), on a machine with no GPU.

Triton compiles for a named target without a device; ptxas (shipped inside Triton's wheel) then reports the
resources. This answers "does this config spill / how many programs fit on an SM" at no device time. Use the
Triton version the GPU machine runs, installed aside (the Gluon kernels exist only under it), e.g.
  pip download --no-deps --only-binary=:all: -d /tmp/t triton==3.6.0
  pip install --no-deps --target /tmp/t36 /tmp/t/*.whl
  PYTHONPATH=/tmp/t36:bridge/src python3 bridge/bench/bench.py regs dkdv,128,32,64,4,3 fwd,128,128,64,8,2,max_regs=128
Each spec: kernel (fwd|dkdv|dq|gluon-dkdv|gluon-dq|gluon-fwd-ws), head dim, BLOCK_M, BLOCK_N, warps, stages (the Gluon
kernels ignore stages; gluon-fwd-ws takes STAGES=, EXP_FTZ=, INTERIOR=), then optional k=v (TMA=0, INTERIOR=2,
max_regs=128, ...). Shapes: one sequence of 8192 tokens, 32/8 heads, bf16, causal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import triton
from sglang_attn_bridge.kernel_launches import attn_fwd_ws_sm90_kernel, dkdv_sm90_kernel, dq_sm90_kernel
from sglang_attn_bridge.kernels.backward import dkdv_kernel, dq_kernel
from sglang_attn_bridge.kernels.forward import attn_fwd_kernel
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

S, HQ, HKV = 8192, 32, 8
KERNELS = {
    "fwd": attn_fwd_kernel,
    "dkdv": dkdv_kernel,
    "dq": dq_kernel,
    "gluon-dkdv": dkdv_sm90_kernel,
    "gluon-dq": dq_sm90_kernel,
    "gluon-fwd-ws": attn_fwd_ws_sm90_kernel,
}
TENSORS = {  # pointer arguments: element type, heads (None: not a [B, S, H, D] tensor)
    "Q": ("bf16", HQ),
    "K": ("bf16", HKV),
    "V": ("bf16", HKV),
    "O": ("bf16", HQ),
    "DO": ("bf16", HQ),
    "DQ": ("bf16", HQ),
    "DK": ("bf16", HKV),
    "DV": ("bf16", HKV),
    "LSE": ("fp32", None),
    "Delta": ("fp32", None),
    "Row": ("i32", None),
    "QStart": ("i32", None),
    "KStart": ("i32", None),
    "LenQ": ("i32", None),
    "LenK": ("i32", None),
    "Counter": ("i32", None),
}
STRIDE_OF = {"q": "Q", "k": "K", "v": "V", "o": "O", "do": "DO", "dq": "DQ", "dk": "DK", "dv": "DV"}


def _value(name: str, d: int):
    """The runtime value the launcher would pass (strides of contiguous [1, S, H, D] tensors)."""
    m = re.fullmatch(r"s(q|k|v|o|do|dq|dk|dv)([bsh])", name)
    if m:
        heads = TENSORS[STRIDE_OF[m.group(1)]][1]
        return {"b": S * heads * d, "s": heads * d, "h": d}[m.group(2)]
    return {
        "sm_scale": 0.09,
        "v_scale": 1.0,
        "lse_sh": S,
        "lse_sb": S,
        "group": HQ // HKV,
        "n_heads": HQ,
        "n_seq": 1,
        "total": HQ * 43,
        "n_blocks": 43,
        "group_pairs": HQ,
        "q_hrow": 0,
    }[name]


def compile_report(kind: str, d: int, block_m: int, block_n: int, warps: int, stages: int, **extra) -> tuple:
    fn = KERNELS[kind]
    consts = dict(
        HEAD_DIM=d,
        BLOCK_D=triton.next_power_of_2(d),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        IS_CAUSAL=True,
        WINDOW=-1,
        SOFTCAP=0.0,
        DOT_PREC="tf32",
        TMA=True,
        COMPUTE_O=True,
        INTERIOR=1,
        FAST=False,
        PAIRS=True,
        DEFER=False,
        PRECISE=False,
        EXP_FTZ=False,
    )
    max_regs = extra.pop("max_regs", 0)
    consts.update(extra)
    sig, attrs, cex = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name], cex[name] = "constexpr", consts[name]
        elif name in TENSORS:
            sig[name], attrs[(i,)] = "*" + TENSORS[name][0], [["tt.divisibility", 16]]
        else:
            v = _value(name, d)
            sig[name] = "fp32" if isinstance(v, float) else "i32"
            if isinstance(v, int) and v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    opts = dict(num_warps=warps, num_stages=stages, **({"maxnreg": max_regs} if max_regs else {}))
    source = ASTSource
    if kind.startswith("gluon"):
        from triton.experimental.gluon._runtime import GluonASTSource as source
    k = triton.compile(
        source(fn=fn, signature=sig, constexprs=cex, attrs=attrs), target=GPUTarget("cuda", 90, 32), options=opts
    )
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "k.ptx"), "w") as f:
            f.write(k.asm["ptx"])
        out = subprocess.run(
            [ptxas, "-v", "--gpu-name", "sm_90a", "k.ptx", "-o", "k.cubin"], cwd=tmp, capture_output=True, text=True
        )
    log = out.stdout + out.stderr
    if out.returncode:  # e.g. a Triton newer than this ptxas: its PTX version is one ptxas does not know
        raise RuntimeError(f"ptxas: {log.strip()[-300:]}")
    regs = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores", log)
    # device-built TMA descriptors: each site has its own scratch slot (the Gluon forward relies on two sets)
    descs = k.asm["ptx"].count("tensormap.cp_fenceproxy")
    for line in log.splitlines():  # ptxas serialises every wgmma of a kernel it cannot pipeline safely, and says so
        if "wgmma" in line.lower():
            print("    ptxas:", line.strip()[:300], flush=True)
    return int(regs.group(1)) if regs else None, int(spills.group(1)) if spills else None, k.metadata.shared, descs


def main(specs: list[str]) -> int:
    print(
        f"triton {triton.__version__}, sm_90a: registers/thread, spill-store bytes, shared bytes, TMA descriptor sites"
    )
    for spec in specs:
        kind, *nums = spec.split(",")
        pos = [int(x) for x in nums if "=" not in x]
        extra = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in nums if "=" in kv}
        flags = ("TMA", "COMPUTE_O", "FAST", "EXP_FTZ", "PAIRS", "DEFER")
        extra = {k: bool(v) if k in flags else v for k, v in extra.items()}
        try:
            regs, spills, smem, descs = compile_report(kind, *pos, **extra)
            print(f"{spec:40} regs {regs} spills {spills} smem {smem} descriptor sites {descs}", flush=True)
        except Exception as e:  # a config Triton rejects: say so and go on
            print(f"{spec:40} ERROR {str(e)[:1500]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
