"""The bridge's settings: read from the environment once, frozen, replaced only inside `override(...)`.

Every behaviour switch lives here, so no call reads `os.environ` and a value is checked once, when it is read:

* ``forward`` (SGLANG_ATTN_BRIDGE_FORWARD = auto | sglang | triton): which forward computes the output. `auto`
  runs the in-tree kernel for every configuration class the probe proved bitwise equal to the installed sglang
  kernel, and sglang's kernel for the rest; `sglang` and `triton` force one.
* ``enable`` (SGLANG_ATTN_BRIDGE_ENABLE = 1 | 0, unset = None): whether `build_model_with_attn_bridge` routes
  "triton" through the bridge (None: only on ROCm, where transformers has no "triton" of its own).
* ``probe_cache`` (SGLANG_ATTN_BRIDGE_PROBE_CACHE = FILE): where the probe also keeps its decisions.
* ``portable`` (SGLANG_ATTN_BRIDGE_PORTABLE = 1): run only the portable Triton kernels, as on ROCm: no Gluon,
  no TMA, no inline PTX, on any GPU. Same bits; the bench measures what the portable path costs.
* ``graphs`` (SGLANG_ATTN_BRIDGE_GRAPHS = 1): the eager path captures a call's launches into a CUDA graph where the
  same call (tensor addresses, shapes, layout) repeats, and replays it (graphs.py); off by default. Same bits.
* ``direct_launch`` (SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH = 1 | 0, default 1): a kernel launched before with the same
  specialization is launched through its compiled launcher, without Triton's per-call argument binding (launch.py);
  0 sends every launch through Triton's own path. Same kernels, same bits; the bench compares the two.
* ``interpreter`` (TRITON_INTERPRET = 1): Triton's CPU interpreter runs the kernels (with small tiles). Triton reads
  the same variable when it is imported, so overriding it only changes what the bridge plans.

`override` is process-wide (autograd runs backwards on its own threads, which must see the same settings); it nests
and restores the previous settings on exit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, fields, replace

from .errors import BridgeConfigError

FORWARDS = ("auto", "sglang", "triton")
ENV = {
    "forward": "SGLANG_ATTN_BRIDGE_FORWARD",
    "enable": "SGLANG_ATTN_BRIDGE_ENABLE",
    "probe_cache": "SGLANG_ATTN_BRIDGE_PROBE_CACHE",
    "portable": "SGLANG_ATTN_BRIDGE_PORTABLE",
    "graphs": "SGLANG_ATTN_BRIDGE_GRAPHS",
    "direct_launch": "SGLANG_ATTN_BRIDGE_DIRECT_LAUNCH",
    "interpreter": "TRITON_INTERPRET",
}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Settings:
    forward: str = "auto"
    enable: bool | None = None
    probe_cache: str | None = None
    portable: bool = False
    graphs: bool = False
    direct_launch: bool = True
    interpreter: bool = False

    def __post_init__(self):
        if self.forward not in FORWARDS:
            raise BridgeConfigError(f"{ENV['forward']}={self.forward!r}: expected one of {', '.join(FORWARDS)}")


def _flag(name: str, value: str, unset=False):
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return unset if v == "" else False
    raise BridgeConfigError(f"{name}={value!r}: expected 1 or 0")


def from_environment(environ=None) -> Settings:
    """Settings as the environment gives them; a malformed value raises BridgeConfigError naming the variable."""
    env = os.environ if environ is None else environ
    return Settings(
        forward=env.get(ENV["forward"], "auto").strip().lower() or "auto",
        enable=_flag(ENV["enable"], env.get(ENV["enable"], ""), unset=None),
        probe_cache=env.get(ENV["probe_cache"]) or None,
        portable=_flag(ENV["portable"], env.get(ENV["portable"], "")),
        graphs=_flag(ENV["graphs"], env.get(ENV["graphs"], "")),
        direct_launch=_flag(ENV["direct_launch"], env.get(ENV["direct_launch"], ""), unset=True),
        interpreter=env.get(ENV["interpreter"], "0").strip() == "1",
    )


_lock = threading.Lock()
_current: Settings | None = None


def current() -> Settings:
    """The settings in force (the environment's, read on first use)."""
    s = _current
    if s is None:
        with _lock:
            s = _set(_current or from_environment())
    return s


def _set(s: Settings) -> Settings:
    global _current
    _current = s
    _on_change()
    return s


_listeners: list = []


def on_change(fn) -> None:
    """Call fn() whenever the settings change (caches derived from them register here)."""
    _listeners.append(fn)


def _on_change() -> None:
    for fn in _listeners:
        fn()


@contextlib.contextmanager
def override(**changes):
    """Inside the block, the settings with `changes` applied (field names as in `Settings`)."""
    known = {f.name for f in fields(Settings)}
    unknown = sorted(changes.keys() - known)
    if unknown:
        raise BridgeConfigError(f"override: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    before = current()
    with _lock:
        new = _set(replace(before, **changes))
    try:
        yield new
    finally:
        with _lock:
            _set(before)


def reload() -> Settings:
    """Read the environment again (tests, or a process that changed its environment on purpose)."""
    with _lock:
        return _set(from_environment())
