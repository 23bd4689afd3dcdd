"""Plot bench_public.json: tokens/s per configuration, one bar per implementation (needs matplotlib; the bridge does
not). Attention calls: tokens of one forward+backward per second; training steps: tokens per second.

    python bridge/bench/plot_public.py results/bridge/<run>/bench_public.json docs/bridge-bench.png
"""

from __future__ import annotations

import json
import sys


def tokens(shape: str) -> int:
    """'4x4096 32/8 D128' -> 16384; 'packed 26 seqs=18432 ...' -> 18432."""
    first = shape.split()[0]
    if first == "packed":
        return int(shape.split("seqs=")[1].split()[0])
    b, s = first.split("x")
    return int(b) * int(s)


def main(src: str, dst: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = json.load(open(src))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [7, 5]})
    cols = [
        ("sdpa", "transformers sdpa"),
        ("varlen", "torch varlen_attn"),
        ("bridge_triton", "bridge, in-tree fwd"),
        ("bridge_sglang", "bridge, sglang fwd"),
        ("bridge_auto", "bridge, auto (default)"),
    ]
    rows = res["attn"]
    width = 0.8 / 4
    for j, (col, label) in enumerate(cols):
        xs, ys = [], []
        for i, r in enumerate(rows):
            if isinstance(r.get(col), float):
                xs.append(i + (max(j - 1, 0) - 1.5) * width)  # sdpa and varlen share the first slot
                ys.append(tokens(r["shape"]) / r[col] * 1e3 / 1e6)
        ax1.bar(xs, ys, width, label=label)
    ax1.set_xticks(range(len(rows)), [r["shape"].replace(" ", "\n") for r in rows], fontsize=8)
    ax1.set_ylabel("M tokens/s (one attention call, fwd+bwd)")
    ax1.set_title("Attention call as transformers makes it (bf16, causal)")
    ax1.legend(fontsize=8)

    train = [r for r in res.get("train", []) if "tokens_per_s" in r]
    labels = [f"{r['batch']}\n{r['attn'].replace(' (auto)', '')}\n{r['mode']}" for r in train]
    colors = {"sdpa": "C0", "varlen": "C1", "bridge (auto)": "C4"}
    ax2.bar(
        range(len(train)),
        [r["tokens_per_s"] / 1e3 for r in train],
        color=[colors.get(r["attn"], "C7") for r in train],
        edgecolor=["black" if r["mode"] == "compiled" else "none" for r in train],
    )
    ax2.set_xticks(range(len(train)), labels, fontsize=7)
    ax2.set_ylabel("k tokens/s (SGD step)")
    ax2.set_title("Qwen3-style 8 layers; outlined: torch.compile")
    meta = res["meta"]
    fig.suptitle(f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, sglang {meta['sglang']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
