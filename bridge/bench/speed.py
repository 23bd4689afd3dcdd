"""(a) The speed table: the bridge's public call against SDPA's, per shape, forward and forward+backward.

Per shape: the bridge's registered attention function and transformers' sdpa_attention_forward on the same tensors,
forward (autograd recording, as in training) and forward+backward, timed in interleaved rounds (harness.py says
what ms, device ms and host us are); x = SDPA time / bridge time; peak MiB of each call; which kernels SDPA ran;
whether the bridge's output equals sglang's kernel (where its wheel is carried). --variant adds bridge columns
under other settings or kernel configs, e.g. --variant "portable:portable=1" --variant "one stream:overlap=0".
Writes speed.json and speed.md.
"""

from __future__ import annotations

import sys

import harness as h
import torch

PARTS = (("fwd", False), ("fwd+bwd", True))


def measure(shape, variants, rounds) -> dict:
    call = h.inputs(shape)
    impls = {"bridge": None, "sdpa": None, **{f"bridge {n}": v for n, v in variants}}
    runs = {
        f"{impl} {part}": h.public("sdpa" if impl == "sdpa" else "bridge", call, bwd, variant=var)
        for impl, var in impls.items()
        for part, bwd in PARTS
    }
    row = {"shape": shape.name, "tokens": shape.tokens, "times": h.interleaved(runs, rounds=rounds)}
    row["peak_mib"] = {}
    for name, fn in runs.items():
        try:
            row["peak_mib"][name] = h.peak_mib(fn)
        except Exception as e:  # already reported by the timing
            row["peak_mib"][name] = f"{type(e).__name__}"
    row["sdpa_kernels"] = h.sdpa_kernels(runs["sdpa fwd+bwd"])
    for impl, var in impls.items():
        if impl != "sdpa":
            with torch.no_grad():
                out = h.public("bridge", call, False, grad=False, variant=var)()
            row["equals_sglang" + impl[len("bridge") :]] = h.equals_sglang(call, out)
    return row


def table(meta: dict, rows: list) -> str:
    def t(r, name, key="ms"):
        v = r["times"].get(name)
        return v.get(key) if isinstance(v, dict) else None

    lines = [
        h.header(meta),
        "",
        "ms: one public call from an idle GPU (CUDA events, median of interleaved rounds); x = SDPA / bridge; device "
        "x: the same with each call queued behind a GPU spin (no launch gaps); host us: CPU time for the bridge's "
        "call to return; peak MiB: memory allocated during one fwd+bwd call beyond its inputs.",
        "",
        "| shape | bridge fwd | SDPA fwd | x fwd | bridge fwd+bwd | SDPA fwd+bwd | x fwd+bwd | device x fwd / "
        "fwd+bwd | host us fwd+bwd (bridge / SDPA) | peak MiB fwd+bwd (bridge / SDPA) | fwd = sglang |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bf, sf, bb, sb = (t(r, n) for n in ("bridge fwd", "sdpa fwd", "bridge fwd+bwd", "sdpa fwd+bwd"))
        dx = (
            f"{h.ratio(t(r, 'sdpa fwd', 'device_ms'), t(r, 'bridge fwd', 'device_ms'))} / "
            f"{h.ratio(t(r, 'sdpa fwd+bwd', 'device_ms'), t(r, 'bridge fwd+bwd', 'device_ms'))}"
        )
        hu = f"{h.fmt(t(r, 'bridge fwd+bwd', 'host_us'), '.0f')} / {h.fmt(t(r, 'sdpa fwd+bwd', 'host_us'), '.0f')}"
        pk = r.get("peak_mib", {})
        mem = f"{h.fmt(pk.get('bridge fwd+bwd'), '.0f')} / {h.fmt(pk.get('sdpa fwd+bwd'), '.0f')}"
        lines.append(
            f"| {r['shape']} | {h.fmt(bf)} | {h.fmt(sf)} | {h.ratio(sf, bf)} | {h.fmt(bb)} | {h.fmt(sb)} | "
            f"{h.ratio(sb, bb)} | {dx} | {hu} | {mem} | {r.get('equals_sglang')} |"
        )
    lines += ["", "Every candidate: ms (range over samples) | device ms | host us | peak MiB; x = SDPA / this", ""]
    lines += ["| shape | candidate | ms | device ms | host us | peak MiB | x |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        for name, v in r["times"].items():
            if not isinstance(v, dict):
                lines.append(f"| {r['shape']} | {name} | {v} | | | | |")
                continue
            part = name.rsplit(" ", 1)[1]
            x = h.ratio(t(r, f"sdpa {part}"), v["ms"]) if not name.startswith("sdpa") else ""
            rng = f"{v['ms']:.3f} ({v['ms_range'][0]:.3f}-{v['ms_range'][1]:.3f})"
            lines.append(
                f"| {r['shape']} | {name} | {rng} | {h.fmt(v.get('device_ms'))} | {h.fmt(v['host_us'], '.0f')} | "
                f"{h.fmt(r.get('peak_mib', {}).get(name), '.0f')} | {x} |"
            )
    lines += [
        "",
        "SDPA's kernels per shape (fwd+bwd): " + "; ".join(f"{r['shape']}: {r.get('sdpa_kernels')}" for r in rows),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = h.parser(__doc__)
    p.add_argument("--shapes", help="comma-separated parts of shape names (default: every shape)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--variant", action="append", default=[], help='"NAME:key=value,..." (harness.parse_variant)')
    a = p.parse_args(argv)
    meta = h.setup()
    variants = [h.parse_variant(v) for v in a.variant]
    rows = []
    for shape in h.pick_shapes(a.shapes):
        try:
            rows.append(measure(shape, variants, a.rounds))
        except Exception as e:  # keep the other shapes' numbers
            rows.append({"shape": shape.name, "times": {"error": f"{type(e).__name__}: {e}"[:400]}, "peak_mib": {}})
        print(rows[-1], flush=True)
        torch.cuda.empty_cache()
    h.write(a.out, "speed", {"meta": meta, "rows": rows}, table(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
