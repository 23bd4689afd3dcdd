"""Step kinds: what an image spec's `steps` list may declare, one module per kind.

A family's `steps` say, in order, everything its image does between the base and the bridge: system packages, pip
pins, source installs of git components, patches. Each entry is a mapping with exactly one kind key (its value is
the kind's main argument) plus that kind's options, or a bare kind name for a kind without arguments; every step may
carry `why:` (rendered as a comment above it), `when: {ARG: VALUE}` (rendered only for the variants whose build
args have those values; what it names still counts as used, since the spec says when) and `provides: [MODULE]` (the
modules it makes importable that its pip names do not say: a stand-in build that skips it expects their gates to
fail, toolkit/plan/stand_in.py). Each kind is one module of this
package, found here: its class's docstring is the kind's contract (what it reads from the spec, what it leaves in
the image, what it may not do). Its Dockerfile text is what its `lines` return, built in Python with the quoting
of toolkit/render/quoting.py; templates/partials/steps_list.j2 only places it, and nothing else writes that text.
docs/step-kinds.md is generated from these docstrings (`python3 -m toolkit.steps`; a test keeps it current).

Values may name a build arg of the variant as `${NAME}` (a compiler's target list, a CUDA major in a package name):
the reference reaches the Dockerfile as a quoted `"${NAME}"` expansion and every other character as literal data. A
reference to an arg the variant does not declare is refused."""

from __future__ import annotations

import importlib
import pkgutil

from toolkit.errors import SpecError, short
from toolkit.spec.schema import STR_LIST, STR_MAP, check
from toolkit.spec.values import CONTROL_RE
from toolkit.steps.base import ARG_REF_RE, Kind, Out, Where, expand


def _discover() -> dict[str, Kind]:
    """Every module of this package but `base` defines one `Kind` subclass; KINDS holds one of each, in `order`."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in ("base", "__main__"):
            importlib.import_module(f"{__name__}.{info.name}")
    kinds = sorted((cls() for cls in Kind.__subclasses__()), key=lambda k: k.order)
    for attr in ("key", "order"):
        values = [getattr(k, attr) for k in kinds]
        if len(set(values)) != len(values):
            raise RuntimeError(f"two step kinds share a {attr}: {values}")
    return {k.key: k for k in kinds}


KINDS: dict[str, Kind] = _discover()


def normalize(raw, where: Where) -> dict:
    """A spec step (a bare kind name, or a mapping with one kind key and its options) as one mapping:
    `{"kind": KEY, "value": MAIN, **options, "why": TEXT}`."""
    if isinstance(raw, str):
        kind = KINDS.get(raw)
        if kind is None or kind.main is not None:
            raise where.error("", f"{short(raw)} is not a step kind without arguments; known kinds: {', '.join(KINDS)}")
        return {"kind": raw}
    if not isinstance(raw, dict):
        raise where.error("", f"expected a step (a mapping with one kind key), got {type(raw).__name__}")
    keys = [k for k in raw if k in KINDS]
    if len(keys) != 1:
        found = ", ".join(map(str, keys)) or "none"
        raise where.error("", f"a step has exactly one kind key (found {found}); known kinds: {', '.join(KINDS)}")
    kind = KINDS[keys[0]]
    if kind.main is None and raw[keys[0]] is not None:
        raise where.error(keys[0], "this kind takes no value: write it as a bare name (or `NAME:` with its options)")
    schema = {kind.key: kind.main, "why": str, "when": STR_MAP, "provides": STR_LIST, **kind.options}
    check({k: val for k, val in raw.items() if val is not None or k != kind.key}, schema, where.file, where.key)
    step = {"kind": kind.key, "value": raw[kind.key]}
    step.update({k: val for k, val in raw.items() if k != kind.key})
    if "why" in step and CONTROL_RE.search(step["why"]):
        raise where.error("why", "one line of text")
    return step


def applies(step: dict, args: dict) -> bool:
    """A step with `when: {ARG: VALUE, ...}` is rendered only for the variants whose build args have those values."""
    return all(args.get(name) == value for name, value in step.get("when", {}).items())


def check_steps(steps, v: dict, where: Where, origin) -> None:
    """Every step valid, and every declared entry consumed: a pin, a component or a patch that no step installs is
    refused (`origin(table, name)` says which file and key declared it), so what the spec says is what is built."""
    used: set[tuple[str, str]] = set()
    seen_patches = False
    copied = set()
    for i, step in enumerate(steps):
        at = Where(where.file, f"{where.key}[{i}]")
        kind = KINDS[step["kind"]]
        for name in step.get("when", {}):
            if name not in (v.get("args") or {}):
                raise at.error(f"when.{short(name, 40, quote=False)}", "names no build arg of the variant")
        kind.check(step, v, at)
        used |= kind.uses(step, v)
        if "prebuilt" in step:
            used.add(("artifacts", step["prebuilt"]))
        seen_patches |= step["kind"] == "patches"
        if step["kind"] == "source" and "into" in step:
            copied.add(step["value"])
    for table in ("pip", "components", "artifacts"):
        for name, entry in (v.get(table) or {}).items():
            if table == "artifacts" and "url" not in entry:
                continue  # a whole release is recorded (its assets' fingerprint labels the image), not installed
            if (table, name) not in used:
                file, key = origin(table, name)
                raise SpecError(file, key, "no step installs it (name it in a step of `steps`, or remove it)")
    for i, p in enumerate(v.get("patches") or ()):
        comp = p.get("component")
        if (comp is None and not seen_patches) or (comp is not None and comp not in copied):
            file, key = origin("patches", i)
            need = "a `patches` step" if comp is None else f"a `source: {comp}` step with `into`"
            raise SpecError(file, key, f"no step applies it ({need})")


def compiling_steps(variant) -> list[str]:
    """The steps of the variant that compile native kernels (a `compile` record), each named by what it builds."""
    named = []
    for step in variant.steps:
        if "compile" in step and applies(step, variant.args):
            value = step["value"]
            named.append(" ".join(value) if isinstance(value, list) else str(value))
    return named


def views(variant, wheels=()) -> list[dict]:
    """What the templates receive: each step that applies to the variant, as its kind resolves it (with the wheels
    of `--source wheels=DIR` in play for `prebuilt`)."""
    data = dict(variant.as_dict(), wheels=list(wheels))
    return [KINDS[step["kind"]].view(step, data) for step in variant.steps if applies(step, variant.args)]


def reference() -> str:
    """docs/step-kinds.md: the contract of every kind, from the docstrings above."""
    out = [
        "# Step kinds",
        "",
        "Generated from `toolkit/steps/` by `python3 -m toolkit.steps > docs/step-kinds.md`; do not edit.",
        "",
        (__doc__ or "").split("\n\n", 1)[1].strip(),
        "",
    ]
    for kind in KINDS.values():
        doc = (type(kind).__doc__ or "").strip().splitlines()
        out += [f"## `{kind.key}`", "", doc[0], ""]
        body = "\n".join(line.strip() for line in doc[1:]).strip()
        if body:
            out += [body, ""]
        opts = ", ".join(f"`{o}`" for o in kind.options) or "none"
        out += [f"Options: {opts}; every step also takes `why` and `when`.", ""]
    return "\n".join(out).rstrip() + "\n"


__all__ = [
    "ARG_REF_RE",
    "KINDS",
    "Kind",
    "Out",
    "Where",
    "applies",
    "check_steps",
    "compiling_steps",
    "expand",
    "normalize",
    "reference",
    "views",
]
