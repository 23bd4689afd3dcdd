"""Speed of the bridge on the GPU: tune per head dim, then one side-by-side table (docs/bridge-h200.md).

Shapes: causal bf16, Hq/Hkv 32/8 and 16/16, D 128 and 64, tokens 1x8192, 4x4096 and 16 packed sequences of mixed
length summing to 16384. Columns: TFLOP/s and ms of forward and backward for the bridge (in-tree forward with the
committed config.py defaults; backward), torch SDPA (default backend; flash backend where it runs), an upstream-style
backward (upstream_baseline.py) and sglang's unified forward. Causal FLOPs: forward 2*S^2*H*D per sequence, backward
2.5x that. Every number is a median of device-event timings taken in interleaved rounds (candidates, or a row's
columns, alternate), so slow drift of clocks or neighbours cannot favour one side. The table's calls are each queued
behind a GPU spin longer than their launch, so it holds device time; a second table gives the headline columns as
single calls from an idle GPU (launch included) with each call's CPU launch time. The tuning times single calls.
Writes bench.json and bench.md to $OUT. BENCH_TUNE=0 skips the tuning (BENCH_TUNE_ONLY=dq: only that kernel),
BENCH_TABLE=0 the table; BENCH_TABLE_TUNED=1 measures the tuner's choice instead of the defaults."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace

import torch
import torch.nn.functional as F
from common import causal_flops, interleaved_ms, load_sglang, make_qkv, packed_lengths
from sglang_attn_bridge import config, kernel_launches, layout
from sglang_attn_bridge.kernels.backward import dkdv_kernel, dq_kernel
from sglang_attn_bridge.kernels.forward import attn_fwd_kernel
from sglang_attn_bridge.scoring import Scoring
from upstream_baseline import upstream_backward

OUT = os.environ.get("OUT", "out")


def shapes():
    for hq, hkv in ((32, 8), (16, 16)):
        for d in (128, 64):
            for name, batch, lens in (
                ("1x8192", 1, [8192]),
                ("4x4096", 4, [4096] * 4),
                ("16 packed=16384", 1, packed_lengths(16384, 16, seed=7)),
            ):
                yield hq, hkv, d, name, batch, lens


def inputs(hq, hkv, d, batch, lens):
    """Batch rows for SDPA-style calls and a packed row for varlen ones (same values)."""
    q, k, v, cu = make_qkv(lens, hq, hkv, d, torch.bfloat16)
    t = sum(lens)
    lay = layout.from_cu_seqlens(cu, cu, t, t)
    return q, k, v, cu, lay


def bridge_fwd(q, k, v, lay, d):
    return lambda: kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))


def bridge_bwd(q, k, v, lay, d):
    o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
    do = torch.randn_like(o)
    return lambda: kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, True))


def sdpa_pair(q, k, v, cu, backend):
    """SDPA on [B, H, S, D] per equal-length group (packed sequences: one call per sequence)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    segs = list(zip(cu.tolist()[:-1], cu.tolist()[1:]))
    views = []
    lens = [e - s for s, e in segs]
    if len(set(lens)) == 1:  # equal lengths: one batched call
        n = lens[0]
        b = len(segs)
        views.append(
            tuple(x[0].view(b, n, x.shape[2], x.shape[3]).transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
        )
    else:
        for s, e in segs:
            views.append(tuple(x[:, s:e].transpose(1, 2).detach().requires_grad_() for x in (q, k, v)))
    ctx = (lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])) if backend == "flash" else None

    def fwd():
        outs = []
        for qq, kk, vv in views:
            if ctx:
                with ctx():
                    outs.append(F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True))
            else:
                outs.append(F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True))
        return outs

    outs = fwd()
    dos = [torch.randn_like(o) for o in outs]

    def bwd():
        for o, do, (qq, kk, vv) in zip(outs, dos, views):
            torch.autograd.grad(o, (qq, kk, vv), do, retain_graph=True)

    return fwd, bwd


def sglang_fwd(mod, q, k, v, cu, lens, d, out=None):
    t = sum(lens)
    o = torch.empty_like(q[0]) if out is None else out
    idx = torch.arange(t, device="cuda")
    pre = torch.zeros(len(lens), dtype=torch.int32, device="cuda")
    fn = mod.extend_attention_fwd_unified
    return lambda: fn(
        q=q[0],
        o=o,
        k_buffer=k[0],
        v_buffer=v[0],
        k_scale=1.0,
        v_scale=1.0,
        qo_indptr=cu,
        kv_indptr=cu,
        kv_indices=idx,
        prefix_lens=pre,
        max_len_extend=max(lens),
        sm_scale=d**-0.5,
    )


def tflops(flops, ms):
    return flops / ms / 1e9


Fw = config.FwdConfig
# Forward candidates per head dim (all bit-exact arithmetic; the tuner checks the bits against sglang). max_regs=128
# lets two 8-warp programs share a multiprocessor (compiled without spills on triton 3.6); gluon_ws runs the
# persistent warp-specialised Gluon forward (kernels/forward_ws_sm90.py) with that many K/V slots. Earlier runs ruled
# out 16 warps (Triton then caps registers at 128: 3x slower), tl.range(warp_specialize=True), the Gluon forward at
# D64, and its ping-pong, Q-in-registers and two-consumer variants (docs/bridge-h200.md).
_T128 = Fw(128, 64, 8, 2, 3, max_regs=128, tma=True, exp_ftz=True)
FWD_CANDIDATES = {
    128: [
        replace(_T128, gluon_ws=4, gluon_group_mb=32),
        replace(_T128, gluon_ws=4, gluon_group_mb=16),
        replace(_T128, gluon_ws=4),
        replace(_T128, gluon_ws=3, gluon_group_mb=32),
        replace(_T128, gluon_ws=4, gluon_group_mb=32, exp_ftz=False),
        _T128,
        replace(_T128, exp_ftz=False),
    ],
    64: [
        Fw(64, 64, 4, 3, 2, exp_ftz=True),
        Fw(64, 64, 4, 3, 2),
        Fw(64, 64, 4, 3, 3, exp_ftz=True),
        Fw(64, 64, 4, 4, 2, exp_ftz=True),
        Fw(128, 64, 8, 2, 2, max_regs=128, exp_ftz=True),
    ],
}
# The fast_fwd column: the same kernel with FlashAttention's arithmetic (exp2, P.V accumulated in place), NOT
# bit-exact with sglang; the fastest such config of the tuning runs. It shows what exactness costs.
FAST = {128: Fw(128, 64, 8, 2, 2, max_regs=128, exact=False), 64: Fw(64, 64, 4, 3, 2, exact=False)}
# (rows per step, keys per program, warps, stages, TMA, register cap) of the dK/dV kernel; (rows per program, keys
# per step, warps, stages, TMA, register cap) of the dQ kernel
DKDV_FIELDS = ("block_m1", "block_n1", "num_warps", "num_stages", "tma", "max_regs", "gluon_dkdv")
# the Triton kernel's candidates, then the Gluon kernel's (kernels/dkdv_sm90.py: rows, keys, warps), which runs
# wherever it applies and leaves the Triton fields to the other cases
GLUON_DKDV = (64, 64, 4), (32, 64, 4), (64, 128, 8)
DKDV_CANDIDATES = {
    128: [
        c + ((),)
        for c in (
            (32, 64, 4, 3, True, 0),
            (32, 64, 4, 3, False, 0),
            (16, 64, 4, 3, True, 0),
            (32, 64, 4, 2, True, 0),
            (64, 128, 8, 2, True, 0),
            (64, 128, 8, 1, False, 0),
        )
    ]
    + [(64, 128, 8, 1, False, 0, g) for g in GLUON_DKDV],
    64: [
        c + ((),)
        for c in (
            (32, 64, 4, 3, True, 0),
            (32, 64, 4, 3, False, 0),
            (16, 64, 4, 3, True, 0),
            (32, 64, 4, 3, True, 168),
            (64, 64, 4, 3, True, 0),
            (64, 128, 8, 2, True, 0),
        )
    ]
    + [(32, 64, 4, 3, False, 0, g) for g in GLUON_DKDV],
}
DQ_FIELDS = ("block_m2", "block_n2", "num_warps2", "num_stages2", "tma2", "max_regs2")
DQ_CANDIDATES = {
    128: [
        (128, 64, 8, 3, False, 0),
        (128, 64, 8, 3, True, 0),
        (128, 32, 8, 3, False, 128),
        (128, 32, 8, 2, False, 128),
        (128, 32, 8, 3, False, 0),
        (128, 64, 8, 4, False, 0),
    ],
    64: [
        (64, 64, 4, 3, True, 0),
        (64, 64, 4, 3, False, 0),
        (128, 64, 8, 3, True, 0),
        (128, 64, 8, 3, False, 0),
        (64, 32, 4, 3, True, 0),
        (64, 64, 4, 2, True, 0),
    ],
}
KERNEL = {"fwd": attn_fwd_kernel, "dkdv": dkdv_kernel, "dq": dq_kernel}
TUNE_ONLY = os.environ.get("BENCH_TUNE_ONLY", "fwd,dkdv,dq").split(",")


def compiled_info(kernel) -> str:
    """Registers / spilled bytes / shared memory of the kernel's most recent compilation (why a config is slow)."""
    try:
        for entry in kernel.device_caches.values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            k = list(cache.values())[-1]
            return f"regs {k.n_regs} spills {k.n_spills} smem {k.metadata.shared}"
    except Exception as e:  # the cache layout is Triton-internal
        return repr(e)[:60]
    return "?"


def _with(d, fn, fwd=None, bwd=None):
    """`fn` run under one head dim's candidate config (set_config is a dict store: no time inside the events)."""

    def run():
        config.set_config(d, fwd=fwd, bwd=bwd)
        return fn()

    return run


def _rank(times: dict) -> dict:
    """{(candidate, shape): ms} -> {candidate: score}: the sum over shapes of ms / best ms on that shape, so one
    long sequence and one packed batch weigh the same. Candidates missing a shape are dropped."""
    shapes = {s for _, s in times}
    best = {s: min(ms for (_, s2), ms in times.items() if s2 == s) for s in shapes}
    cands = {c for c, _ in times}
    return {c: sum(times[c, s] / best[s] for s in shapes) for c in cands if all((c, s) in times for s in shapes)}


def _timed(runs: dict, label: str, log: list) -> dict:
    """Interleaved medians of {(candidate, shape): fn}; prints and logs each, drops the ones that failed."""
    times = {}
    for key, ms in interleaved_ms(runs).items():
        if isinstance(ms, Exception):
            print(f"tune {label} {key}: ERROR {ms!r}"[:300], flush=True)
            continue
        times[key] = ms
        log.append(dict(kind=label, cfg=str(key[0]), shape=key[1], ms=ms))
        print(f"tune {label} {key[1]:16} {key[0]}: {ms:.3f} ms", flush=True)
    return times


def tune_fwd(d, cases, ref, log):
    """Forward candidates side by side on every tuning shape; keep the best-scoring bit-exact one."""
    runs, exact = {}, {}
    for c in FWD_CANDIDATES[d]:
        config.set_config(d, fwd=c)
        name, q, k, v, lay = cases[0]
        try:
            # compiles; then the bits against sglang
            o = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))[0][0]
        except Exception as e:
            print(f"tune fwd D{d} {c}: ERROR {e!r}"[:300], flush=True)
            continue
        exact[c] = bool(torch.equal(o, ref)) if ref is not None else None
        kernel = kernel_launches.attn_fwd_ws_sm90_kernel if c.gluon_ws else attn_fwd_kernel
        log.append(dict(kind=f"fwd D{d}", cfg=str(c), compiled=compiled_info(kernel), bitexact=exact[c]))
        print(f"tune fwd D{d} {c}: bit-exact with sglang: {exact[c]}", flush=True)
        for name, q, k, v, lay in cases:
            runs[c, name] = _with(
                d, lambda q=q, k=k, v=v, lay=lay: kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True)), fwd=c
            )
    score = _rank(_timed(runs, f"fwd D{d}", log))
    ok = [c for c in score if exact[c] is not False]
    if ok:
        config.set_config(d, fwd=min(ok, key=score.get))


def tune_bwd_part(part, fields, candidates, base, d, cases, log) -> dict:
    """One backward kernel (with delta) per candidate, side by side on every tuning shape; the best-scoring fields."""
    runs = {}
    for cand in candidates:
        c = replace(base, **dict(zip(fields, cand)))
        config.set_config(d, bwd=c)
        try:
            cases[0][1]()
        except Exception as e:
            print(f"tune {part} D{d} {cand}: ERROR {e!r}"[:300], flush=True)
            continue
        kernel = kernel_launches.dkdv_sm90_kernel if part == "dkdv" and c.gluon_dkdv else KERNEL[part]
        log.append(dict(kind=f"{part} D{d}", cfg=str(cand), compiled=compiled_info(kernel)))
        for name, run in cases:
            runs[cand, name] = _with(d, run, bwd=c)
    score = _rank(_timed(runs, f"{part} D{d}", log))
    config.set_config(d, bwd=base)
    return dict(zip(fields, min(score, key=score.get))) if score else {}


def tune(mod, log):
    """Pick forward/backward configs per head dim, scored on one long sequence and one packed batch (32/8 heads);
    forward variants must stay bit-exact."""
    chosen = {}
    for d in (128, 64):
        cases, ref = [], None
        for name, lens in (("1x8192", [8192]), ("16 packed=16384", packed_lengths(16384, 16, seed=7))):
            q, k, v, cu, lay = inputs(32, 8, d, 1, lens)
            cases.append((name, q, k, v, lay))
            if ref is None and mod is not None:
                ref = torch.empty_like(q[0])
                sglang_fwd(mod, q, k, v, cu, lens, d, out=ref)()
        if "fwd" in TUNE_ONLY:
            tune_fwd(d, cases, ref, log)
        # the two backward kernels are independent: tune each alone (delta + that kernel), then combine
        base = config.GPU_BWD[d]
        parts = {"dkdv": [], "dq": []}
        for name, q, k, v, lay in cases:
            o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
            do = torch.randn_like(o)
            for part, runs in parts.items():
                runs.append(
                    (
                        name,
                        lambda q=q, k=k, v=v, lay=lay, o=o, lse=lse, do=do, part=part: kernel_launches.backward(
                            do, q, k, v, o, lse, lay, Scoring(d**-0.5, True), parts=(part,)
                        ),
                    )
                )
        c = base
        if "dkdv" in TUNE_ONLY:
            c = replace(c, **tune_bwd_part("dkdv", DKDV_FIELDS, DKDV_CANDIDATES[d], base, d, parts["dkdv"], log))
        if "dq" in TUNE_ONLY:
            c = replace(c, **tune_bwd_part("dq", DQ_FIELDS, DQ_CANDIDATES[d], base, d, parts["dq"], log))
        config.set_config(d, bwd=c)
        chosen[d] = dict(fwd=str(config.GPU_FWD[d]), bwd=str(config.GPU_BWD[d]))
        print(f"chosen D{d}: {chosen[d]}", flush=True)
    return chosen


def main():
    t0 = time.time()
    torch.manual_seed(0)
    mod = load_sglang()
    log = []
    defaults = dict(config.GPU_FWD), dict(config.GPU_BWD)
    chosen = tune(mod, log) if os.environ.get("BENCH_TUNE", "1") == "1" else {}
    print("tuner's choice (update config.py when it holds across runs):", chosen, flush=True)
    if os.environ.get("BENCH_TABLE_TUNED") != "1":
        config.GPU_FWD.update(defaults[0])  # the table measures what users get: the committed defaults
        config.GPU_BWD.update(defaults[1])
    table = []
    for hq, hkv, d, name, batch, lens in shapes() if os.environ.get("BENCH_TABLE", "1") == "1" else ():
        q, k, v, cu, lay = inputs(hq, hkv, d, batch, lens)
        fl = causal_flops(lens, hq, d)
        row = dict(shape=f"{hq}/{hkv} D{d} {name}")
        cols = {
            "bridge_fwd": lambda: bridge_fwd(q, k, v, lay, d),
            "bridge_bwd": lambda: bridge_bwd(q, k, v, lay, d),
            "sdpa_fwd": lambda: sdpa_pair(q, k, v, cu, "default")[0],
            "sdpa_bwd": lambda: sdpa_pair(q, k, v, cu, "default")[1],
            "flash_fwd": lambda: sdpa_pair(q, k, v, cu, "flash")[0],
            "flash_bwd": lambda: sdpa_pair(q, k, v, cu, "flash")[1],
        }
        if d in FAST:

            def fast_fwd(q=q, k=k, v=v, lay=lay, d=d):
                cfg = FAST[d]

                def run():
                    saved = config.GPU_FWD[d]
                    config.GPU_FWD[d] = cfg
                    try:
                        return kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
                    finally:
                        config.GPU_FWD[d] = saved

                return run

            cols["fast_fwd"] = fast_fwd
        if mod is not None:
            cols["sglang_fwd"] = lambda: sglang_fwd(mod, q, k, v, cu, lens, d)
        o_up, _ = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
        do_up = torch.randn_like(o_up)
        cols["upstream_bwd"] = lambda: lambda: upstream_backward(do_up, q, k, v, o_up, cu, d**-0.5)
        fns = {}
        for col, make in cols.items():
            try:
                fns[col] = make()
            except Exception as e:
                row[col] = dict(error=repr(e)[:160])
        launch = {}
        # side by side, every column seeing the same clocks: device time (launch overhead hidden, as when the CPU
        # runs ahead in training), then the four headline columns once more as single calls from an idle GPU
        for col, ms in interleaved_ms(fns, device_only=True, launch=launch).items():
            if isinstance(ms, Exception):
                row[col] = dict(error=repr(ms)[:160])
                continue
            mult = 2.5 if col.endswith("bwd") else 1.0
            row[col] = dict(ms=round(ms, 4), tflops=round(tflops(mult * fl, ms), 1), launch_us=round(launch[col], 1))
        calls = {c: fns[c] for c in CALL_COLS if c in fns and "ms" in row.get(c, {})}
        for col, ms in interleaved_ms(calls).items():
            if not isinstance(ms, Exception):
                row[col]["call_ms"] = round(ms, 4)
        table.append(row)
        print(json.dumps(row), flush=True)
        cols = q = k = v = None  # free this shape's tensors before the next one
        torch.cuda.empty_cache()
    os.makedirs(OUT, exist_ok=True)
    gpu = torch.cuda.get_device_name(0)
    meta = dict(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        gpu=gpu,
        torch=torch.__version__,
        triton=__import__("triton").__version__,
        chosen=chosen,
        defaults={d: dict(fwd=str(defaults[0][d]), bwd=str(defaults[1][d])) for d in (64, 128)},
        fast={d: str(c) for d, c in FAST.items()},
        sglang=getattr(sys.modules.get("sglang"), "__version__", None),
    )
    with open(os.path.join(OUT, "bench.json"), "w") as f:
        json.dump(dict(meta=meta, table=table, tune=log), f, indent=1)
    md = markdown(meta, table)
    with open(os.path.join(OUT, "bench.md"), "w") as f:
        f.write(md)
    print(md)
    print(f"bench done in {time.time() - t0:.0f}s")


CALL_COLS = ("bridge_fwd", "sdpa_fwd", "bridge_bwd", "sdpa_bwd")


def _cell(row, col):
    c = row.get(col)
    if not c:
        return "-"
    if "error" in c:
        return "n/a"
    return f"{c['tflops']:.0f} ({c['ms']:.2f})"


def markdown(meta, table):
    cols = [
        "bridge_fwd",
        "fast_fwd",
        "sdpa_fwd",
        "flash_fwd",
        "sglang_fwd",
        "bridge_bwd",
        "sdpa_bwd",
        "flash_bwd",
        "upstream_bwd",
    ]
    lines = [
        f"{meta['gpu']}, {meta['date']}, torch {meta['torch']}, triton {meta['triton']}, sglang {meta['sglang']}",
        "",
        "TFLOP/s (ms) of device time, causal bf16; backward FLOPs = 2.5x forward. Each timed call is queued "
        "behind a GPU spin longer than its launch, so the CPU's launch overhead is not in it (as in training, "
        "where the CPU runs ahead); the second table has single calls from an idle GPU, launch included.",
        "",
        "| shape | " + " | ".join(cols) + " | bwd/sdpa | bwd/upstream | fwd/sdpa |",
        "|" + "---|" * (len(cols) + 4),
    ]
    for row in table:

        def r(a, b):
            try:
                return f"{row[b]['ms'] / row[a]['ms']:.2f}x"
            except (KeyError, TypeError, ZeroDivisionError):
                return "-"

        lines.append(
            f"| {row['shape']} | "
            + " | ".join(_cell(row, c) for c in cols)
            + f" | {r('bridge_bwd', 'sdpa_bwd')} | {r('bridge_bwd', 'upstream_bwd')} "
            f"| {r('bridge_fwd', 'sdpa_fwd')} |"
        )
    lines += [
        "",
        "Single calls from an idle GPU: ms (CPU us to queue the call, worst of 3); the launch is in the time",
        "",
        "| shape | " + " | ".join(CALL_COLS) + " | fwd/sdpa | bwd/sdpa |",
        "|" + "---|" * (len(CALL_COLS) + 3),
    ]
    for row in table:

        def call(c):
            x = row.get(c) or {}
            return f"{x['call_ms']:.2f} ({x['launch_us']:.0f})" if "call_ms" in x else "-"

        def ratio(a, b):
            try:
                return f"{row[b]['call_ms'] / row[a]['call_ms']:.2f}x"
            except (KeyError, TypeError, ZeroDivisionError):
                return "-"

        lines.append(
            f"| {row['shape']} | "
            + " | ".join(call(c) for c in CALL_COLS)
            + f" | {ratio('bridge_fwd', 'sdpa_fwd')} | {ratio('bridge_bwd', 'sdpa_bwd')} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
