"""Decide, per configuration class, whether the in-tree forward may stand in for the installed sglang kernel.

The in-tree forward does sglang's arithmetic instruction for instruction over the same 64-key tiles, so it gives
sglang's bits by construction, and it is 2-3x faster than sglang's kernel plus an LSE pass. Construction is checked,
not assumed, on every device, Triton and sglang release: under the `auto` forward the first call of each class runs
both kernels on inputs chosen for the cases that change rounding and compares them with torch.equal. A class is what
the kernels choose between: dtype, head dim, causal, window, softcap and which in-tree kernel runs (Gluon or Triton);
its key also holds the sglang, Triton and torch versions and the device, so a change of any of them probes again.

The probe inputs (`_inputs`): packed sequences with 1-token sequences, cached prefixes (queries shorter than keys) and
a long row; GQA and plain heads; ordinary logits; logits so large that most probabilities, and outputs whose
strongest key has a zero value, lie in the subnormal range; key tiles that a row sees none of (the -inf rows of a
causal edge, a window or a prefix). A class passes only on equality everywhere.

Decisions live in memory; the `probe_cache` setting (SGLANG_ATTN_BRIDGE_PROBE_CACHE=FILE) also keeps them in a JSON
file, so a later process of the same install skips the probe. A mismatch, or a probe that fails, keeps sglang's
kernel for that class and is logged once with the reason.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass

import torch

from . import config, kernel_launches, layout, settings
from .scoring import Scoring
from .sglang_resolution import resolve, sglang_forward, sglang_version

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeClass:
    dtype: str
    head_dim: int
    causal: bool
    window: bool
    softcap: bool
    kernel: str  # the in-tree forward that runs for this class: "gluon" or "triton"


@dataclass(frozen=True)
class Decision:
    in_tree: bool
    reason: str


_lock = threading.Lock()
_decisions: dict[str, Decision] = {}
_disk_loaded: set[str] = set()
_recent: dict = {}  # (kernel, class, device) -> decision: the per-call lookup, without building the full key


_environments: dict = {}


def environment(device: torch.device) -> dict:
    """What besides the class decides the bits: releases and the device (read once per device and kernel: looking
    up versions costs more than a short attention call)."""
    res = resolve()
    key = (device, res.kernel)
    env = _environments.get(key)
    if env is None:
        env = _environments[key] = _read_environment(device, res)
    return env


def _read_environment(device: torch.device, res) -> dict:
    import triton

    if config.interpreting():
        arch = "triton-interpreter"
    elif device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        arch = getattr(props, "gcnArchName", None) if torch.version.hip else None
        arch = arch or f"sm_{props.major}{props.minor}"
        arch = f"{props.name} {arch}"
    else:
        arch = device.type
    return {
        "sglang": sglang_version() or "unknown",
        "sglang_api": res.kernel.generation if res.kernel else "",
        "triton": triton.__version__,
        "torch": torch.__version__,
        "device": arch,
    }


def class_of(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scoring: Scoring) -> ProbeClass:
    """The class of a call on [B, S, H, D] views (no device sync)."""
    return ProbeClass(
        str(q.dtype).replace("torch.", ""),
        int(q.shape[-1]),
        bool(scoring.causal),
        scoring.window is not None,
        bool(scoring.softcap),
        kernel_launches.forward_kernel(q, k, v, scoring.window, scoring.softcap),
    )


def _key(env: dict, cls: ProbeClass) -> str:
    return json.dumps({**env, **asdict(cls)}, sort_keys=True)


def _cache_file() -> str | None:
    return settings.current().probe_cache


def _load_disk(path: str) -> None:
    if path in _disk_loaded:
        return
    _disk_loaded.add(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return
    for key, (in_tree, reason) in data.items():
        _decisions.setdefault(key, Decision(bool(in_tree), str(reason)))


def _save_disk(path: str) -> None:
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({k: [d.in_tree, d.reason] for k, d in _decisions.items()}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        logger.warning("sglang_attn_bridge: cannot write the probe cache %s: %s", path, e)


# (query heads, KV heads, scale of q and k, fraction of v set to zero): ordinary logits; logits so large (|s| in the
# hundreds) that most probabilities are subnormal or zero and an output whose strongest key has v = 0 is itself
# subnormal; moderate logits with one KV head
_CASES = ((16, 4, 1.0, 0.0), (8, 8, 16.0, 0.5), (8, 1, 4.0, 0.0))
_CASES_SMALL = ((4, 2, 1.0, 0.0), (2, 2, 16.0, 0.5))
# (query length, key length): 1-token sequences (with and without a prefix), prefixes, a row much longer than one
# key tile; each sequence's first query rows see none of the later key tiles (-inf rows under a causal mask)
_SEQS = ((1, 1), (1, 300), (700, 700), (333, 1500), (64, 64), (3000, 3000), (1, 64))
_SEQS_SMALL = ((1, 1), (1, 17), (40, 40), (30, 71), (5, 5), (150, 150))
PROBE_WINDOW = 5  # sglang's convention: a window shorter than a key tile, so most tiles are -inf for most rows
PROBE_SOFTCAP = 7.5


def _inputs(cls: ProbeClass, device, seed: int):
    """(q, k, v, layout) of each probe call: one packed row of `_SEQS` per case of `_CASES`."""
    small = config.interpreting()
    seqs = _SEQS_SMALL if small else _SEQS
    dtype = getattr(torch, cls.dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    lq = torch.tensor([s[0] for s in seqs])
    lk = torch.tensor([s[1] for s in seqs])
    cu_q = torch.cat([torch.zeros(1, dtype=torch.long), lq.cumsum(0)]).to(torch.int32).to(device)
    cu_k = torch.cat([torch.zeros(1, dtype=torch.long), lk.cumsum(0)]).to(torch.int32).to(device)
    tq, tk = int(lq.sum()), int(lk.sum())
    lay = layout.from_cu_seqlens(cu_q, cu_k, tq, tk)
    for hq, hkv, spread, zeros in _CASES_SMALL if small else _CASES:
        q = (torch.randn(1, tq, hq, cls.head_dim, generator=gen) * spread).to(device, dtype)
        k = (torch.randn(1, tk, hkv, cls.head_dim, generator=gen) * spread).to(device, dtype)
        v = torch.randn(1, tk, hkv, cls.head_dim, generator=gen)
        if zeros:
            v = v * (torch.rand(v.shape, generator=gen) >= zeros)
        yield q, k, v.to(device, dtype), lay


def run_probe(kernel, cls: ProbeClass, device, seed: int = 0) -> Decision:
    """Both forwards on the probe inputs; in-tree only if every output is bitwise equal and covers every token."""
    scoring = Scoring.of(
        cls.head_dim**-0.5, cls.causal, PROBE_WINDOW if cls.window else None, PROBE_SOFTCAP if cls.softcap else 0.0
    )
    checked = 0
    for q, k, v, lay in _inputs(cls, device, seed):
        mine = kernel_launches.forward(q, k, v, lay, scoring, gluon=cls.kernel == "gluon")[0]
        theirs = sglang_forward(kernel, q, k, v, lay, scoring)
        if not torch.isfinite(theirs).all():
            return Decision(False, "sglang's kernel gave non-finite values on the probe inputs")
        if not torch.equal(mine, theirs):
            diff = (mine.float() - theirs.float()).abs()
            bad = int((diff != 0).sum()) + int((mine.isnan() != theirs.isnan()).sum())
            return Decision(
                False,
                f"{bad} of {mine.numel()} output elements differ (max |diff| "
                f"{diff.nan_to_num(float('inf')).max().item():.3g}; Hq/Hkv "
                f"{q.shape[2]}/{k.shape[2]})",
            )
        checked += 1
    return Decision(True, f"bitwise equal on {checked} probe calls")


def decide(kernel, cls: ProbeClass, device: torch.device) -> Decision:
    """The cached decision for a class, probing on first use."""
    hit = _recent.get((kernel, cls, device))
    if hit is not None:
        return hit
    env = environment(device)
    key = _key(env, cls)
    hit = _decisions.get(key)
    if hit is not None:
        _recent[(kernel, cls, device)] = hit
        return hit
    with _lock:
        path = _cache_file()
        if path:
            _load_disk(path)
        hit = _decisions.get(key)
        if hit is not None:
            return hit
        started = time.perf_counter()
        try:
            with torch.no_grad():
                decision = run_probe(kernel, cls, device)
        except Exception as e:  # a probe that cannot run proves nothing: keep sglang's kernel (logged below)
            decision = Decision(False, f"probe failed: {type(e).__name__}: {e}")
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - started
        decision = Decision(decision.in_tree, f"{decision.reason}; probed in {seconds:.1f} s, compiles included")
        _decisions[key] = decision
        what = "in-tree forward" if decision.in_tree else "sglang's kernel"
        (logger.info if decision.in_tree else logger.warning)(
            "sglang_attn_bridge: %s for %s on %s (sglang %s, triton %s): %s",
            what,
            describe(cls),
            env["device"],
            env["sglang"],
            env["triton"],
            decision.reason,
        )
        if path:
            _save_disk(path)
        return decision


def describe(cls: ProbeClass) -> str:
    flags = ["causal" if cls.causal else "non-causal"] + [
        f for f, on in (("window", cls.window), ("softcap", cls.softcap)) if on
    ]
    return f"{cls.dtype} D{cls.head_dim} {'+'.join(flags)} ({cls.kernel})"


def clear() -> None:
    """Forget every decision held in memory (tests; a new sglang in the same process)."""
    with _lock:
        _decisions.clear()
        _disk_loaded.clear()
        _environments.clear()
        _recent.clear()


def standard_classes(device: torch.device) -> list[ProbeClass]:
    """The classes a doctor run reports: the dtypes and head dims models use, with each flag alone."""
    dtypes = ("float16",) if config.interpreting() or device.type != "cuda" else ("bfloat16", "float16")
    dims = (64,) if config.interpreting() else (64, 128)
    flags = ((True, False, False), (False, False, False), (True, True, False), (True, False, True))
    out = []
    for dt in dtypes:
        for d in dims:
            for causal, window, softcap in flags:
                t = torch.empty(1, 1, 1, d, device=device, dtype=getattr(torch, dt))
                kernel = kernel_launches.forward_kernel(t, t, t, 1 if window else None, 1.0 if softcap else 0.0)
                out.append(ProbeClass(dt, d, causal, window, softcap, kernel))
    return out


def report_lines(device: torch.device | None = None) -> list[tuple[str, str, str]]:
    """(class, chosen forward, reason) for each standard class, probing where needed: the doctor prints these.
    Empty when no sglang kernel is resolved (the in-tree forward is then the only one)."""
    res = resolve()
    if res.kernel is None:
        return []
    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = []
    for cls in standard_classes(device):
        d = decide(res.kernel, cls, device)
        out.append((describe(cls), "in-tree" if d.in_tree else "sglang", d.reason))
    return out


def print_report(line, device: torch.device) -> None:
    """The doctor's lines: the forward chosen for each standard class on `device` (a GPU, or the CPU under the
    interpreter), probing where needed; `line(status, what, detail)` prints one. Nothing without an sglang kernel."""
    mode = settings.current().forward
    for cls, choice, reason in report_lines(device):
        forced = "" if mode == "auto" else f"; {settings.ENV['forward']}={mode} overrides it"
        line("INFO", "auto forward", f"{cls}: {choice} ({reason}{forced})")
