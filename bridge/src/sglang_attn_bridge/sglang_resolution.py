"""Find sglang's deterministic extend-attention forward across its API generations, and call it safely on the
bridge's [B, S, H, D] views (`sglang_forward`: the forward whose bits are inference's).

Generations: <= 0.5.5 (srt path, no k_scale/v_scale); 0.5.10-0.5.14 (srt path, k_scale/v_scale are required
positionals after v_buffer, so an old positional call shifts every argument and fails); 0.5.16 and later (moved to
sglang.kernels, with page_size/score_mod/aux_tensors: every wheel from 0.5.16 to 0.5.23). The module paths and
keywords live in `sglang_api` (the image gate reads the same table). We read the signature instead of trusting a
version string, call only by keyword, always pass sm_scale, and pass k_scale=1.0, v_scale=1.0 wherever the kernel
takes them.
A signature with a required parameter we do not know is refused: guessing is how the upstream call broke.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field

import torch

from .errors import BridgeUnsupported
from .layout import Varlen
from .scoring import Scoring
from .sglang_api import EXTEND_ATTENTION as _TABLE

MODULES = tuple(_TABLE["modules"])
FUNCTION = _TABLE["function"]
_SCALES = tuple(_TABLE["groups"][0])  # ("k_scale", "v_scale")
_KNOWN_REQUIRED = set(_TABLE["keywords"]) | {k for group in _TABLE["groups"] for k in group}
_NEEDED = set(_TABLE["keywords"]) - set(_TABLE["optional"])


@dataclass(frozen=True)
class SglangKernel:
    fn: object
    module: str
    generation: str
    params: frozenset = field(default_factory=frozenset)

    def call(
        self,
        q,
        o,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        prefix_lens,
        max_len_extend,
        sm_scale,
        causal=True,
        sliding_window_size=-1,
        logit_cap=0.0,
    ):
        kwargs = dict(
            q=q,
            o=o,
            k_buffer=k_buffer,
            v_buffer=v_buffer,
            qo_indptr=qo_indptr,
            kv_indptr=kv_indptr,
            kv_indices=kv_indices,
            prefix_lens=prefix_lens,
            max_len_extend=max_len_extend,
            sm_scale=float(sm_scale),
        )
        if _SCALES[0] in self.params:
            kwargs.update(dict.fromkeys(_SCALES, 1.0))
        optional = {
            "is_causal": bool(causal),
            "sliding_window_size": int(sliding_window_size),
            "logit_cap": float(logit_cap),
        }
        defaults = {"is_causal": True, "sliding_window_size": -1, "logit_cap": 0.0}
        for name, value in optional.items():
            if name in self.params:
                kwargs[name] = value
            elif value != defaults[name]:
                raise BridgeUnsupported(f"sglang {self.generation} kernel has no '{name}' parameter")
        return self.fn(**kwargs)


def classify(fn, module: str) -> tuple[str, frozenset]:
    """(generation label, parameter names) from a signature; raises TypeError for one we cannot call safely."""
    params = inspect.signature(fn).parameters
    names = frozenset(params)
    required = {
        n
        for n, p in params.items()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    unknown = required - _KNOWN_REQUIRED
    missing = _NEEDED - names
    if unknown or missing:
        raise TypeError(
            f"{module}.{FUNCTION} has an unknown signature (unknown required {sorted(unknown)}, "
            f"missing {sorted(missing)}): {inspect.signature(fn)}"
        )
    if ("k_scale" in names) != ("v_scale" in names):
        raise TypeError(f"{module}.{FUNCTION}: k_scale without v_scale (or the reverse) is not a known generation")
    if module == MODULES[0]:
        gen = "0.5.16+ (sglang.kernels, page_size)" if "page_size" in names else "sglang.kernels (no page_size)"
    elif "k_scale" in names:
        gen = "0.5.10-0.5.14 (srt, k_scale/v_scale)"
    else:
        gen = "<=0.5.5 (srt, no k_scale)"
    return gen, names


@dataclass
class Resolution:
    kernel: SglangKernel | None
    installed: bool
    reason: str  # why there is no kernel (empty when there is one)


_cached: Resolution | None = None


def resolve(refresh: bool = False) -> Resolution:
    """Locate sglang's kernel; cached. installed=True with kernel=None means sglang is present but unusable."""
    global _cached
    if _cached is not None and not refresh:
        return _cached
    try:
        installed = importlib.util.find_spec("sglang") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        _cached = Resolution(None, False, "sglang is not installed")
        return _cached
    errors = []
    for module in MODULES:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            errors.append(f"{module}: {e}")
            continue
        except Exception as e:  # heavy sglang imports can fail in many ways; report, never hide
            errors.append(f"{module}: import failed: {type(e).__name__}: {e}")
            continue
        fn = getattr(mod, FUNCTION, None)
        if fn is None:
            errors.append(f"{module} has no {FUNCTION}")
            continue
        try:
            gen, params = classify(fn, module)
        except (TypeError, ValueError) as e:
            errors.append(str(e))
            continue
        _cached = Resolution(SglangKernel(fn, module, gen, params), True, "")
        return _cached
    _cached = Resolution(None, True, "; ".join(errors))
    return _cached


def sglang_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:
        try:
            return importlib.import_module("sglang.version").__version__
        except Exception:
            return None


def sglang_forward(kernel: SglangKernel, q, k, v, lay: Varlen, scoring: Scoring):
    """sglang's output for q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D], on packed [T, H, D] copies (views when the batch is
    one row covering all tokens)."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    cu_q, cu_k = lay.cu_seqlens()
    o = (torch.empty if lay.covers_all else torch.zeros)((B, Sq, Hq, D), device=q.device, dtype=q.dtype)
    one_row = B == 1 and lay.covers_all and all(t.stride(-1) == 1 for t in (q, k, v))
    if one_row:
        qp, kp, vp, op = q[0], k[0], v[0], o[0]
    else:
        qi, ki = lay.token_index(Sq, "q"), lay.token_index(Sk, "k")
        qp = q.reshape(B * Sq, Hq, D).index_select(0, qi)
        kp = k.reshape(B * Sk, Hkv, D).index_select(0, ki)
        vp = v.reshape(B * Sk, Hkv, D).index_select(0, ki)
        op = torch.empty_like(qp)
    kv_indices = torch.arange(kp.shape[0], device=q.device, dtype=torch.int64)
    prefix = (lay.len_k - lay.len_q).to(torch.int32)
    kernel.call(
        qp,
        op,
        kp,
        vp,
        cu_q,
        cu_k,
        kv_indices,
        prefix,
        lay.max_q,
        scoring.scale,
        causal=scoring.causal,
        sliding_window_size=-1 if scoring.window is None else scoring.window,
        logit_cap=scoring.softcap,
    )
    if not one_row:
        o.view(B * Sq, Hq, D).index_copy_(0, qi, op)
    return o
