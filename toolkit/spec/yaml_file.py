"""Reading a spec file's YAML safely: no duplicate keys, no alias bombs, string keys only."""

from __future__ import annotations

import yaml

from toolkit.errors import SpecError, short

MAX_YAML_NODES = 100_000  # values after alias expansion: far above any real spec, far below a "billion laughs"


def check_keys(value, file: str, key: str) -> None:
    """Every mapping key is a string: YAML reads `1:`, `true:`, `~:` as a number, a boolean, null, which the
    checks of names (identifiers, package names) cannot take."""
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{key}.{k}" if key else str(k)
            if not isinstance(k, str):
                raise SpecError(
                    file, short(sub, 80, quote=False), f"a key must be a string, got {type(k).__name__} {short(k)}"
                )
            check_keys(v, file, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_keys(item, file, f"{key}[{i}]")


class SpecLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing what a spec never needs: duplicate keys (last-wins hides a change)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {short(key)}", key_node.start_mark
                )
        return super().construct_mapping(node, deep)


class AliasBomb(Exception):
    """Aliases expand to more values than any spec holds (a "billion laughs" document)."""


def _expanded_size(node, memo: dict, active: set) -> int:
    """How many values `node` stands for once every alias is expanded (shared nodes counted each time)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise AliasBomb("a recursive alias")
    active.add(key)
    if isinstance(node, yaml.ScalarNode):
        size = 1
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(n, memo, active) for n in node.value)
    else:
        size = 1 + sum(_expanded_size(k, memo, active) + _expanded_size(v, memo, active) for k, v in node.value)
    active.discard(key)
    if size > MAX_YAML_NODES:
        raise AliasBomb(f"aliases expand to more than {MAX_YAML_NODES} values")
    memo[key] = size
    return size


def load_yaml(text: str):
    """Parse one spec document with SpecLoader, refusing it before construction if aliases blow it up."""
    loader = SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()
