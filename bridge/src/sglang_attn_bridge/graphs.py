"""Opt-in CUDA-graph replay of a call's kernel launches where the same call repeats (setting `graphs`).

A short attention call is bound by the CPU: Python, the plan and four or five launches take longer to queue than the
GPU takes to run them. With `graphs` on (SGLANG_ATTN_BRIDGE_GRAPHS=1, or `settings.override(graphs=True)`), the
eager path's forward and backward each go through `run`: a call is keyed by its tensors' addresses, shapes, strides
and dtypes, its layout's arrays, its scalars, the settings and the config tables. The first call of a key runs as
usual (it compiles and runs the probe); the second captures the launches into a CUDA graph; every later one
replays it, one launch on the host. The kernels, their inputs and their order are the captured call's, so the bits
are the uncaptured path's.

What replay cannot do, so the capture is keyed on it: read inputs from other addresses. So it pays only where a
loop calls attention on the same buffers again (a bench loop, a fixed-buffer inference loop). In a transformers
training step it does not: measured on the H200 (results/bridge/2026-12-02-h200-long-calls/graphs-train-keys.log),
the attention inputs of a Qwen3-style 4x4096 step land at new addresses nearly every step: 96 calls in 6 steps made
94 keys and 2 captures, and the steps with a capture were 15% slower (a capture costs ~25 ms; bench_public-train.md:
0.92x the uncaptured step over 8 steps). A key seen once runs plain; seen twice, it is captured; at most
`MAX_GRAPHS` keys are kept (the oldest go first). Replaying calls whose addresses change would need the inputs
copied into the graph's own buffers first: not built. Outputs are copied out of the graph's memory before they are
returned, so a later replay never overwrites a tensor the caller holds (gradients accumulated across micro-batches,
outputs kept for logging); the copies cost device time (50-180 us a fwd+bwd on the bench's shapes).
A call that cannot be captured (an error inside the capture) runs uncaptured from then on, with one warning.
Off by default; the eager path only (under torch.compile, Inductor's own `mode="reduce-overhead"` captures graphs).
"""

from __future__ import annotations

import torch

from . import config, settings
from .errors import warn_once

MAX_GRAPHS = 256
_SEEN, _OFF = "seen", "off"
_entries: dict = {}


def enabled(q: torch.Tensor) -> bool:
    return settings.current().graphs and q.is_cuda and not torch.cuda.is_current_stream_capturing()


def _tensor_key(t):
    if t is None:
        return None
    return t.data_ptr(), t.shape, t.stride(), t.dtype, t.device


def key(kind: str, tensors, lay, scalars) -> tuple:
    d = tensors[1].shape[-1]  # q is the first tensor of the forward, the second of the backward (after dO)
    arrays = (lay.row, lay.q_start, lay.k_start, lay.len_q, lay.len_k)
    return (
        kind,
        tuple(_tensor_key(t) for t in tensors),
        tuple(_tensor_key(a) for a in arrays),
        (lay.n, lay.max_q, lay.max_k, lay.covers_all),
        scalars,
        settings.current(),
        id(config.fwd_config(d)),
        id(config.bwd_config(d)),
        torch.cuda.current_stream(tensors[1].device).cuda_stream,
    )


def _copy_out(outs):
    return tuple(None if t is None else t.clone() for t in outs)


def run(k: tuple, fn, keep: tuple):
    """fn() -> a tuple of tensors (or None): run, captured or replayed as the module docstring says. `keep` holds
    what the captured launches read beyond fn's tensor arguments (the layout), alive while the graph lives."""
    entry = _entries.get(k)
    if entry is None or entry == _OFF:
        if entry is None:
            if len(_entries) >= MAX_GRAPHS:
                del _entries[next(iter(_entries))]
            _entries[k] = _SEEN
        return fn()
    if entry == _SEEN:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outs = fn()
        except Exception as e:  # noqa: BLE001 (any failure inside a capture means: do not capture this call)
            _entries[k] = _OFF
            warn_once(
                ("graph", k[0], type(e).__name__),
                "graphs: a %s call could not be captured (%s: %s); it runs uncaptured",
                k[0],
                type(e).__name__,
                str(e)[:200],
            )
            return fn()
        entry = _entries[k] = (graph, outs, keep)
    graph, outs, _ = entry
    graph.replay()
    return _copy_out(outs)


def clear() -> None:
    """Drop every kept graph (and the memory it holds)."""
    _entries.clear()
