"""The gate config: one JSON shape, rendered by the build plan from the image spec, validated here.

Every problem is a ConfigError whose message is one line naming the file and the key, because the file is
machine-written and a person reads the error in a build log. This is the one schema of the gate config: the
toolkit applies ``from_dict`` when a spec loads, so a config the runner would refuse never starts a build. The
schema of each key is its gate kind's (``verify/kinds/``); a config may not weaken itself (an explicitly empty
check list, a command that is not the image's Python on a probe or a module, a ``pip check`` allowance that names
no requirement are refused).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from . import stand_in
from .kinds import BY_KEY, KINDS, TOP_KEYS
from .kinds.base import ConfigError, config_error

__all__ = ["ConfigError", "GateConfig", "TOP_KEYS", "from_dict", "load_config"]


class GateConfig:
    """The checks to run: for each gate kind's config key, its items (absent when the kind is not asked for)."""

    def __init__(self, items: Optional[Dict[str, List[Any]]] = None, stand_in: Optional[Dict[str, Any]] = None):
        self.items: Dict[str, List[Any]] = {k: v for k, v in (items or {}).items() if v}
        self.stand_in = stand_in  # a stand-in build's excuses (verify/stand_in.py); None for every real build

    def __getitem__(self, key: str) -> List[Any]:
        return self.items.get(key, [])

    def __contains__(self, key: str) -> bool:
        return key in self.items

    def is_empty(self) -> bool:
        return not self.items

    def merge_flags(self, args: Any) -> None:
        """Add what the command-line flags ask for, by each kind's own rule."""
        for kind in KINDS:
            merged = kind.merge(self[kind.key], kind.from_flags(args))
            if merged:
                self.items[kind.key] = merged

    def to_dict(self) -> Dict[str, Any]:
        out = {kind.key: kind.dump(self.items[kind.key]) for kind in KINDS if kind.key in self.items}
        if self.stand_in is not None:
            out[stand_in.KEY] = self.stand_in
        return out


def from_dict(data: Any, where: str = "config") -> GateConfig:
    """Validate a parsed config; ``where`` names the source in error messages."""
    if not isinstance(data, dict):
        raise ConfigError("%s: the top level must be a JSON object" % where)
    known = TOP_KEYS + (stand_in.KEY,)
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise config_error(where, unknown[0], "is not a known key (%s)" % ", ".join(known))
    excuses = data.get(stand_in.KEY)
    return GateConfig(
        {key: BY_KEY[key].parse(value, where) for key, value in data.items() if value is not None and key in BY_KEY},
        stand_in.parse(excuses, where) if excuses is not None else None,
    )


def load_config(path: str) -> GateConfig:
    """Read and validate a JSON gate config; any problem is a one-line ConfigError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError("%s: not UTF-8 text: %s" % (path, exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "%s: invalid JSON at line %d column %d: %s" % (path, exc.lineno, exc.colno, exc.msg)
        ) from None
    return from_dict(data, path)
