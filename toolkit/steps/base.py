"""What every step kind shares: the base class, where a step sits, `${ARG}` references and the lookups of
the variant's tables that several kinds make."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from toolkit import artifacts as art
from toolkit.errors import SpecError, short
from toolkit.spec_values import CONTROL_RE, IDENT_RE

ARG_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# An extra package index a pip step declares (a vendor's wheel index): https, a host name, plain path segments.
INDEX_URL_RE = re.compile(r"https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~+-]+)*/?")
# A requirement text a manifest rewrite matches or writes: PEP 508 characters, no quotes, no shell syntax.
REQ_TEXT_RE = re.compile(r"[A-Za-z0-9._\[\]<>=!~, -]+")
MANIFEST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.toml")
GLOB_RE = re.compile(r"[A-Za-z0-9._/*+-]+")
PIP_FLAGS = ("no-deps", "no-build-isolation", "force-reinstall")


def expand(text: str, args: dict) -> str:
    """`text` with each `${NAME}` replaced by the arg's value: what a validator checks (the image sees the same)."""
    return ARG_REF_RE.sub(lambda m: str(args.get(m.group(1), "")), text)


@dataclass(frozen=True)
class Where:
    """Where a step sits, for error lines: the file and the dotted key of the step."""

    file: str
    key: str

    def error(self, sub: str, problem: str) -> SpecError:
        return SpecError(self.file, f"{self.key}.{sub}" if sub else self.key, problem)


def check_refs(value: str, args: dict, where: Where, sub: str) -> None:
    for name in ARG_REF_RE.findall(value):
        if name not in args:
            raise where.error(sub, f"${{{name}}} names no build arg of the variant (args: {', '.join(sorted(args))})")
    rest = ARG_REF_RE.sub("", value)
    if "${" in rest or CONTROL_RE.search(value):
        raise where.error(sub, f"not a plain value or `${{ARG}}` reference: {short(value)}")


class Kind:
    """One step kind. `key` is its YAML key, `main` the schema of that key's value (None: the kind takes no value and
    is written as a bare name), `options` the schema of its other keys."""

    key: ClassVar[str]
    order: ClassVar[int]  # its place in KINDS and in docs/step-kinds.md
    main: ClassVar[Any] = None
    options: ClassVar[dict] = {}

    def check(self, step: dict, v: dict, where: Where) -> None:
        """Refuse what this kind cannot render safely or what names nothing in the variant."""

    def uses(self, step: dict, v: dict) -> set[tuple[str, str]]:
        """The table entries (`pip`, `components`) this step consumes: an entry no step consumes is refused."""
        return set()

    def view(self, step: dict, v: dict) -> dict:
        """What the macro receives: the step's own values plus what it resolves from the variant's tables."""
        return dict(step)


def need_pin(name: str, v: dict, where: Where, sub: str) -> None:
    if name not in (v.get("pip") or {}):
        raise where.error(sub, f"{short(name)} is not in the variant's `pip` table (pins live there, steps name them)")


def need_component(name: str, v: dict, where: Where, sub: str) -> dict:
    comp = (v.get("components") or {}).get(name)
    if comp is None:
        raise where.error(sub, f"{short(name)} is not a component of the variant")
    return comp


def need_artifact(name, v: dict, where: Where, sub: str, wheel: bool = False) -> dict:
    """The record of a family artifact that names one file (locked or pending); a wheel when `wheel`."""
    record = (v.get("artifacts") or {}).get(name) if isinstance(name, str) else None
    if record is None:
        raise where.error(sub, f"{short(name)} is not an artifact of the family (declare it under `artifacts`)")
    if "url" not in record:
        raise where.error(sub, f"artifact {short(name)} is a whole release; a step reads one file (declare it by url)")
    if wheel and art.wheel_dist(art.file_name(record)) is None:
        raise where.error(sub, f"artifact {short(name)} is not a wheel: {short(art.file_name(record))}")
    return record


def check_prebuilt(step: dict, v: dict, where: Where) -> None:
    if "prebuilt" in step:
        need_artifact(step["prebuilt"], v, where, "prebuilt", wheel=True)


def with_prebuilt(step: dict, v: dict, target: str) -> dict:
    """A step's view with its prebuilt choice (toolkit/artifacts.py) and the artifact it then reads."""
    choice = art.prebuilt_choice(step, v.get("artifacts") or {}, v.get("wheels") or ())
    if choice is None:
        return step
    reads = [choice["name"]] if choice["how"] == "artifact" else []
    return dict(step, choice=choice, target=target, reads_artifacts=reads)


def check_flags_env(step: dict, v: dict, where: Where) -> None:
    for i, flag in enumerate(step.get("flags", [])):
        if flag not in PIP_FLAGS:
            raise where.error(f"flags[{i}]", f"unknown pip flag {short(flag)}; known: {', '.join(PIP_FLAGS)}")
    for name, value in step.get("env", {}).items():
        if not IDENT_RE.fullmatch(name):
            raise where.error(f"env.{short(name, 40, quote=False)}", "names are identifiers")
        check_refs(value, v.get("args") or {}, where, f"env.{name}")
