"""The spec's schema language and its checker: a key maps to a python type, ("list", T), ("map", T) for
str-keyed mappings, or a nested dict (a mapping with exactly those optional keys). `check` reports the first value
that does not fit as one SpecError line naming the file and the dotted key."""

from __future__ import annotations

from toolkit.errors import SpecError, short

STR_MAP = ("map", str)
STR_LIST = ("list", str)
GATES = "gates"  # a mapping whose schema verify/config.py owns (toolkit.spec.catalog.check_gates applies it)
STEPS = "steps"  # a list whose items toolkit/steps/ checks (each step kind owns its options)


def type_name(t) -> str:
    if isinstance(t, dict):
        return "mapping"
    if isinstance(t, tuple):
        return "list" if t[0] == "list" else "mapping"
    return {str: "string", int: "integer", bool: "boolean"}.get(t, getattr(t, "__name__", str(t)))


def check(value, schema, file: str, key: str) -> None:
    """Raise SpecError for the first value that does not fit the schema."""
    if schema is GATES:
        if not isinstance(value, dict):
            raise SpecError(file, key, f"expected a mapping, got {type(value).__name__}")
        return
    if schema is STEPS:
        if not isinstance(value, list):
            raise SpecError(file, key, f"expected a list of steps, got {type(value).__name__}")
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise SpecError(file, key, f"expected a mapping, got {type(value).__name__}")
        for k, v in value.items():
            sub = f"{key}.{k}" if key else str(k)
            if k not in schema:
                raise SpecError(file, short(sub, 80, quote=False), "unknown key")
            check(v, schema[k], file, sub)
    elif isinstance(schema, tuple):
        kind, inner = schema
        if kind == "list":
            if not isinstance(value, list):
                raise SpecError(file, key, f"expected a list, got {type(value).__name__}")
            for i, item in enumerate(value):
                check(item, inner, file, f"{key}[{i}]")
        else:
            if not isinstance(value, dict):
                raise SpecError(file, key, f"expected a mapping, got {type(value).__name__}")
            for k, v in value.items():
                check(v, inner, file, f"{key}.{k}")
    else:
        ok = isinstance(value, schema) and not (schema is int and isinstance(value, bool))
        if schema is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            ok = False
        if not ok:
            name = type_name(schema)
            article = "an" if name[0] in "aeiou" else "a"
            raise SpecError(file, key, f"expected {article} {name}, got {type(value).__name__} {short(value)}")
