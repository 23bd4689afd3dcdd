"""The registry of gate kinds: every module of this package defines one ``Gate`` subclass, found here.

Adding a kind is one module in this folder. The runner's order, its flags, the config schema, the
container-structure-test export and the README's gate table are all read from ``KINDS``.
"""

from __future__ import annotations

import importlib
import os
from typing import Dict, Tuple

from .base import REGISTERED, Gate

_HERE = os.path.dirname(os.path.abspath(__file__))


def _discover() -> Tuple[Gate, ...]:
    for name in sorted(os.listdir(_HERE)):
        if name.endswith(".py") and name not in ("__init__.py", "base.py", "__main__.py"):
            importlib.import_module("%s.%s" % (__name__, name[:-3]))
    kinds = sorted((cls() for cls in REGISTERED), key=lambda k: k.order)
    for attr in ("key", "kind", "order"):
        seen: Dict[object, str] = {}
        for k in kinds:
            value = getattr(k, attr)
            if value in seen:
                raise RuntimeError(
                    "gate kinds %s and %s share the %s %r" % (seen[value], type(k).__name__, attr, value)
                )
            seen[value] = type(k).__name__
    return tuple(kinds)


KINDS: Tuple[Gate, ...] = _discover()
BY_KEY: Dict[str, Gate] = {k.key: k for k in KINDS}
TOP_KEYS: Tuple[str, ...] = tuple(k.key for k in KINDS)


def readme_table() -> str:
    """The gate table of verify/README.md, with the order line above it (a test keeps the README equal to it)."""
    rows = [
        "Order: %s." % ", ".join(k.kind for k in KINDS),
        "",
        "| check | config key | passes when | never does |",
        "|---|---|---|---|",
    ]
    rows += ["| %s | `%s` | %s | %s |" % (k.kind, k.key, k.passes_when, k.never_does) for k in KINDS]
    return "\n".join(rows) + "\n"


__all__ = ["KINDS", "BY_KEY", "TOP_KEYS", "Gate", "readme_table"]
