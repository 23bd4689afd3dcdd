"""The bench's one harness: shapes, inputs, the public calls, timing, memory, results.

Every entry (speed.py, first_use.py, launch_cost.py, memory.py; `bench.py` runs them by name) builds its
callables from here and times them here, so one number means one thing everywhere:

* ms: CUDA-event time of one call started on an idle GPU after an L2 flush (as triton's do_bench times it): what a
  call costs in a loop, the CPU's launch work included where the call is host-bound;
* device ms: the same call queued behind a GPU spin longer than its launch, so the span holds device work only (what
  a call costs when the CPU runs ahead, as in a training step);
* host us: CPU time for the public call to return, the GPU idle before it (what the Python caller waits);
* every candidate is timed in interleaved rounds (each round times each candidate `reps` times, in turn), after a
  warm-up, and the median over all rounds is reported, so clock and neighbour drift hit every candidate alike;
* peak MiB: the most memory allocated during one call beyond what was allocated before it.

The public calls are the ones transformers (and miles through it) make: `register()`, then the registered attention
function (`sglang_attn_bridge.hf_attention.triton_attention_forward`) with q/k [B, H, S, D] contiguous as after
RoPE and v a transposed view, beside transformers' `sdpa_attention_forward` (torch.nn.functional.
scaled_dot_product_attention, whichever backend torch picks) on the same tensors.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPIN_PER_US = 2000  # torch.cuda._sleep cycles per microsecond, about (a Hopper SM clock of ~2 GHz)


@dataclass(frozen=True)
class Shape:
    """One bench row: `batch` rows of `seq` tokens (packed: one row of `batch` sequences of mixed lengths summing
    to `seq`), Hq/Hkv heads of dim `d`, causal bf16."""

    name: str
    batch: int
    seq: int
    hq: int
    hkv: int
    d: int
    packed: bool = False

    @property
    def tokens(self) -> int:
        return self.seq if self.packed else self.batch * self.seq

    def lens(self) -> list[int]:
        return packed_lengths(self.seq, self.batch, seed=7) if self.packed else [self.seq] * self.batch


SHAPES = {
    s.name: s
    for s in (
        Shape("1x8192 32/8 D128", 1, 8192, 32, 8, 128),
        Shape("4x4096 32/8 D128", 4, 4096, 32, 8, 128),
        Shape("4x4096 16/16 D128", 4, 4096, 16, 16, 128),
        Shape("4x4096 32/8 D64", 4, 4096, 32, 8, 64),
        Shape("1x16384 32/8 D128", 1, 16384, 32, 8, 128),
        Shape("1x32768 32/8 D128", 1, 32768, 32, 8, 128),
        Shape("packed 26 seqs=18432 32/8 D128", 26, 18432, 32, 8, 128, packed=True),
        Shape("2x2048 32/8 D128", 2, 2048, 32, 8, 128),
        Shape("8x1024 32/8 D128", 8, 1024, 32, 8, 128),
    )
}
SHORT = ("2x2048 32/8 D128", "8x1024 32/8 D128")


def packed_lengths(total: int, n: int, seed: int = 0) -> list[int]:
    """n mixed lengths summing to total (the packed row's sequences)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(n, generator=g) + 0.25
    lens = (w / w.sum() * total).floor().long()
    lens[-1] += total - lens.sum()
    return lens.tolist()


def pick_shapes(spec: str | None, default=tuple(SHAPES)) -> list[Shape]:
    """Shapes whose name contains one of the comma-separated parts of `spec` (all of `default` without one)."""
    names = default if not spec else [n for n in SHAPES if any(p.strip() in n for p in spec.split(","))]
    return [SHAPES[n] for n in names]


# --- set-up and the machine ---------------------------------------------------------------------------------------


def load_sglang():
    """sglang's kernel module from the carried wheel (SGLANG_WHEEL, or .whl/sglang-*.whl at the repository root;
    sglang_loader.py extracts its kernel files), or None. An installed sglang is found by the bridge itself."""
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        return sys.modules.get("sglang") or __import__("sglang")
    wheels = [os.environ["SGLANG_WHEEL"]] if os.environ.get("SGLANG_WHEEL") else []
    wheels += sorted(glob.glob(os.path.join(ROOT, ".whl", "sglang-*.whl")))
    if not wheels:
        return None
    from sglang_loader import load  # a sibling module: this folder is sys.path[0] for the entries

    return load(wheels[-1])


def setup(describe: bool = True) -> dict:
    """sglang's kernel (where carried), register(); the machine and versions, for every result file."""
    import transformers
    import triton

    mod = load_sglang()
    from sglang_attn_bridge import __version__, register

    register()
    if not describe:
        return {}
    smi = _smi("--query-gpu=name,driver_version", "--format=csv,noheader")
    return dict(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        nvidia_smi=smi,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        triton=triton.__version__,
        transformers=transformers.__version__,
        bridge=__version__,
        sglang=getattr(sys.modules.get("sglang"), "__version__", None) if mod else None,
        python=sys.version.split()[0],
    )


def _smi(*args) -> str | None:
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


# --- inputs and the public calls -------------------------------------------------------------------------------------


class CausalLayer(torch.nn.Module):
    """What transformers' attention functions read from the calling layer (num_key_value_groups is set per call)."""

    is_causal = True


@dataclass
class Call:
    """One row's tensors as transformers passes them, and what the public functions need besides."""

    shape: Shape
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    do: torch.Tensor
    module: CausalLayer
    kwargs: dict = field(default_factory=dict)

    def layout(self):
        from sglang_attn_bridge import layout

        s = self.shape
        if not s.packed:
            return layout.dense(s.batch, s.seq, s.seq, self.q.device)
        cu = torch.tensor([0] + s.lens()).cumsum(0).to(self.q.device, torch.int32)
        return layout.from_cu_seqlens(cu, cu, s.seq, s.seq)


def inputs(shape: Shape, dtype=torch.bfloat16, device="cuda", seed=0) -> Call:
    """q, k (B, H, S, D) contiguous, v the same shape as a view of a (B, S, H, D) buffer, the output gradient, the
    calling layer and, for a packed row, position_ids restarting at each sequence (as a packed batch arrives)."""
    rows = 1 if shape.packed else shape.batch
    s, d = shape.seq, shape.d
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*size):
        return torch.randn(*size, device=device, dtype=dtype, generator=g)

    q = randn(rows, shape.hq, s, d).requires_grad_()
    k = randn(rows, shape.hkv, s, d).requires_grad_()
    v = randn(rows, s, shape.hkv, d).transpose(1, 2).detach().requires_grad_()
    do = randn(rows, s, shape.hq, d)
    mod = CausalLayer()
    mod.num_key_value_groups = shape.hq // shape.hkv  # what sdpa_attention_forward reads to expand K/V
    kw = {}
    if shape.packed:
        kw["position_ids"] = torch.cat([torch.arange(n) for n in shape.lens()])[None].to(device)
    return Call(shape, q, k, v, do, mod, kw)


def attention_fn(impl: str):
    """The public attention function of `impl`: "bridge" (the registered function) or "sdpa" (transformers')."""
    if impl == "sdpa":
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    from sglang_attn_bridge.hf_attention import triton_attention_forward

    return triton_attention_forward


def _sdpa_packed(fn, call: Call):
    """SDPA has no packed mode: one call per sequence of the row, outputs concatenated (what a user must write)."""
    bounds = [0] + torch.tensor(call.shape.lens()).cumsum(0).tolist()
    scale = call.shape.d**-0.5
    outs = [
        fn(call.module, *(x[:, :, a:b] for x in (call.q, call.k, call.v)), None, scaling=scale, dropout=0.0)[0]
        for a, b in zip(bounds[:-1], bounds[1:])
    ]
    return torch.cat(outs, dim=1)


def public(impl: str, call: Call, backward: bool, grad: bool = True, variant: dict | None = None):
    """A callable making one public call of `impl` on `call`'s tensors: forward only (with autograd recording, as a
    training forward does, unless grad=False), or forward and backward (the gradients dropped after it), under
    the bridge `variant` (apply_variant's spec) when one is given."""
    fn = attention_fn(impl)
    scale = call.shape.d**-0.5
    q, k, v = call.q, call.k, call.v

    def forward():
        if impl == "sdpa" and call.shape.packed:
            return _sdpa_packed(fn, call)
        return fn(call.module, q, k, v, None, scaling=scale, dropout=0.0, **call.kwargs)[0]

    def run():
        with torch.set_grad_enabled(grad):
            out = forward()
        if backward:
            out.backward(call.do)
            q.grad = k.grad = v.grad = None
        return out

    if not variant:
        return run

    def run_variant():
        with apply_variant(variant, call.shape.d):
            return run()

    return run_variant


def parse_variant(spec: str) -> tuple[str, dict]:
    """ "NAME:key=value,key=value" -> (NAME, {key: value}). Keys are bridge settings (portable, graphs, forward,
    direct_launch) or fields of the head dim's kernel configs (config.FwdConfig / BwdConfig, e.g. overlap=0,
    gluon_ws=0, exp_ftz=1, gluon_dq=(128,64,8)); values are parsed as Python literals where they are one."""
    import ast
    import re

    name, _, body = spec.partition(":")
    kv = {}
    for part in filter(None, re.split(r",(?![^()]*\))", body)):  # commas inside a tuple's parentheses stay
        key, _, value = part.partition("=")
        try:
            kv[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            kv[key.strip()] = value.strip()
    return name.strip(), kv


@contextmanager
def apply_variant(variant: dict, d: int):
    """Inside the block, the bridge's settings and head dim d's kernel configs with `variant` applied; undone after."""
    from dataclasses import fields

    from sglang_attn_bridge import config, settings

    names = {f.name for f in fields(settings.Settings)}
    over = {k: v for k, v in variant.items() if k in names}
    cfg = {k: v for k, v in variant.items() if k not in names}
    saved = config.fwd_config(d, interpreter=False), config.bwd_config(d, interpreter=False)  # the GPU tables
    with ExitStack() as stack:
        stack.enter_context(settings.override(**over))
        if cfg:
            config.set_config(d, **cfg)
            stack.callback(config.set_config, d, fwd=saved[0], bwd=saved[1])
        yield


# --- timing ----------------------------------------------------------------------------------------------------------

_FLUSH: list = []


def _flush_l2() -> None:
    if not _FLUSH:
        _FLUSH.append(torch.empty(256 * 2**20, dtype=torch.int8, device="cuda"))
    _FLUSH[0].zero_()


def sample(fn, lead_us: float = 0.0) -> tuple[float, float]:
    """One timed call: (event ms, host us). lead_us = 0: the GPU is idle when the call starts (after an L2 flush);
    lead_us > 0: the call is queued behind a GPU spin of about that long, so the events hold its device work only."""
    _flush_l2()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if lead_us:
        torch.cuda._sleep(int(lead_us * SPIN_PER_US))
    t0 = time.perf_counter()
    a.record()
    fn()
    host = time.perf_counter() - t0
    b.record()
    b.synchronize()
    return a.elapsed_time(b), host * 1e6


def interleaved(runs: dict, rounds: int = 7, reps: int = 3, warmup: int = 3, device: bool = True) -> dict:
    """{name: fn} -> {name: {"ms", "host_us", "device_ms"?, "ms_range"}} (medians over rounds x reps samples), or
    {name: "Error: ..."} for a candidate that raised during warm-up. Candidates alternate within every round."""
    out, ok = {}, {}
    for name, fn in runs.items():
        try:
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            ok[name] = {"ms": [], "host_us": [], "device_ms": []}
        except Exception as e:  # a candidate that does not compile or does not fit: say so, time the others
            out[name] = f"{type(e).__name__}: {str(e)[:300]}"
    lead = {}
    for _ in range(rounds):
        for name, s in ok.items():
            for _ in range(reps):
                ms, us = sample(runs[name])
                s["ms"].append(ms)
                s["host_us"].append(us)
                lead[name] = max(lead.get(name, 0.0), 2 * us + 100)
            if device:
                for _ in range(reps):
                    s["device_ms"].append(sample(runs[name], lead_us=lead[name])[0])
    for name, s in ok.items():
        res = {k: statistics.median(v) for k, v in s.items() if v}
        res["ms_range"] = [min(s["ms"]), max(s["ms"])]
        out[name] = res
    return out


def busy_host_us(runs: dict, calls: int = 30, loops: int = 7) -> dict:
    """{name: fn} -> {name: CPU us to queue one call}: `calls` calls back to back behind a GPU spin long enough that
    none waits for the GPU, the median of `loops` such loops, loops interleaved across the candidates."""
    samples: dict = {n: [] for n in runs}
    for fn in runs.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    for _ in range(loops):
        for name, fn in runs.items():
            torch.cuda.synchronize()
            torch.cuda._sleep(int(3000 * calls * SPIN_PER_US))
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
    return {n: statistics.median(t) for n, t in samples.items()}


def peak_mib(fn) -> float:
    """The most memory allocated during one call of fn beyond what was allocated before it (MiB)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def sdpa_kernels(fn) -> list[str]:
    """The attention kernels torch ran for one call of fn (which SDPA backend it picked: flash, cuDNN, ...)."""
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        fn()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    keys = ("flash", "cudnn", "fmha", "attention", "sdpa", "efficient")
    return sorted(n[:90] for n in names if any(k in n.lower() for k in keys))


def equals_sglang(call: Call, out) -> bool | None:
    """Whether the public output `out` equals sglang's kernel on the same inputs (None: no sglang kernel here)."""
    from sglang_attn_bridge.scoring import Scoring
    from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward

    kern = resolve(refresh=True).kernel
    if kern is None:
        return None
    with torch.no_grad():
        qt, kt, vt = (x.detach().transpose(1, 2) for x in (call.q, call.k, call.v))
        ref = sglang_forward(kern, qt, kt, vt, call.layout(), Scoring(call.shape.d**-0.5, True))
    return bool(torch.equal(out.detach(), ref))


# --- results ---------------------------------------------------------------------------------------------------------


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0], epilog=doc)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--out", default=os.environ.get("OUT", "out"), help="folder for <entry>.json and .md ($OUT)")
    return p


def write(out: str, name: str, results: dict, text: str) -> None:
    """results to <out>/<name>.json and text to <out>/<name>.md (and stdout)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write(text.rstrip() + "\n")
    print(text, flush=True)


def header(meta: dict) -> str:
    return (
        f"{meta.get('gpu')} (driver {(meta.get('nvidia_smi') or '?').split(',')[-1].strip()}), {meta.get('date')}: "
        f"torch {meta.get('torch')} (CUDA {meta.get('cuda')}), triton {meta.get('triton')}, transformers "
        f"{meta.get('transformers')}, bridge {meta.get('bridge')}, sglang kernel {meta.get('sglang')}"
    )


def fmt(x, spec: str = ".3f", none: str = "-") -> str:
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else none


def ratio(a, b) -> str:
    """a / b as '1.23x', or '-' where either is missing."""
    return f"{a / b:.2f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"
