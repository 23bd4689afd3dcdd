"""The bridge's exceptions, one type per kind of failure, all under `BridgeError`.

* `BridgeUnsupported` — an input or feature the bridge refuses rather than computing something else (a subclass of
  NotImplementedError and ValueError, so callers that catch either keep working); the message says what was asked
  for and which attention implementation supports it.
* `BridgeConfigError` — a setting, environment variable or tuning field with a value the bridge does not know (a
  ValueError); the message names the setting.
* `SglangKernelError` — sglang is installed (or required) but its kernel cannot be used (a RuntimeError): training
  would silently stop matching inference, so this is never turned into a fallback.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("sglang_attn_bridge")


class BridgeError(Exception):
    """Any error the bridge raises on purpose."""


class BridgeUnsupported(BridgeError, NotImplementedError, ValueError):
    """An input or feature the bridge refuses rather than computing something else."""


class BridgeConfigError(BridgeError, ValueError):
    """A setting or tuning value the bridge does not accept."""


class SglangKernelError(BridgeError, RuntimeError):
    """sglang's kernel is needed but cannot be used."""


_warned: set = set()


def warn_once(key, msg: str, *args) -> None:
    """logger.warning(msg, *args) the first time `key` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(msg, *args)
