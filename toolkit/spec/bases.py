"""The GPU base images, described once (images/bases/*.yaml): what a build relies on in each base, read from public
records, so code and tests take a base's Python, torch, sglang and paths from one place instead of assuming them.

A base file holds facts, each `{value: ..., record: "..."}`: the record names where the value was read (a
repository at a commit and a path, or upstream miles' file at its release), or says what was searched when
`value` is null. The file is validated once here; a problem is one SpecError line naming the file and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from toolkit.errors import SpecError, UsageError, short
from toolkit.spec.catalog import IMAGES_DIR, read_spec_file
from toolkit.spec.schema import check
from toolkit.spec.values import (
    CONTROL_RE,
    PLATFORM_RE,
    PY_VERSION_RE,
    check_abs_path,
    check_image_ref,
    check_python,
    check_rel_path,
    pep440,
    pip_name_problem,
)

BASES_DIR = IMAGES_DIR / "bases"

FACT = {"value": object, "record": str}
# A fact's value kind: "version" (PEP 440), "pyver" (MAJOR.MINOR), "dotted" (digits and dots: a toolkit or
# runtime release), "path" (absolute), "relpath" (inside the sglang tree), "command" (the interpreter),
# "platforms", "archs", "digest".
CUDA_FACTS = {"nvcc": "dotted", "home": "path", "driver_stub": "path"}
ROCM_FACTS = {"version": "dotted", "path": "path"}
SECTIONS = {
    "python": {"version": "pyver", "full_version": "version", "command": "command", "site_packages": "path"},
    "torch": {"version": "version", "cuda": "dotted", "hip": "dotted"},
    "sglang": {"version": "version", "tree": "path", "pyproject": "relpath"},
    "cuda": CUDA_FACTS,
    "rocm": ROCM_FACTS,
}
# glibc: the oldest C library the base is known to have (a lower bound from a record): the manylinux tags its pip
# accepts, as toolkit/lock/pip_index.py asks the index.
TOP = {"digest": "digest", "platforms": "platforms", "archs": "archs", "glibc": "dotted"}
SCHEMA = {
    "image": str,
    **{k: FACT for k in TOP},
    **{section: {k: FACT for k in facts} for section, facts in SECTIONS.items()},
    "distributions": ("map", FACT),
}
REQUIRED = ("image", "digest", "platforms", "glibc", "python", "torch", "sglang", "archs", "distributions")
DOTTED_RE = re.compile(r"[0-9]+(\.[0-9]+)*")
ARCH_RE = re.compile(r"sm_[0-9]+[a-z]?|[0-9]+\.[0-9]+[a-z]?|gfx[0-9a-f]+")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
MAX_RECORD = 600


def file_name(image: str) -> str:
    """`lmsysorg/sglang:v0.5.16` -> `lmsysorg-sglang-v0.5.16.yaml`: the reference with `/` and `:` as `-`."""
    return image.replace("/", "-").replace(":", "-") + ".yaml"


@dataclass(frozen=True)
class Base:
    """One base image's facts, as typed values (None where no record says it); `records` maps each fact's dotted
    key to its record."""

    image: str
    file: str
    digest: str | None
    platforms: tuple
    glibc: str | None
    python_version: str
    python_full_version: str | None
    python: str
    site_packages: str | None
    torch_version: str | None
    torch_cuda: str | None
    torch_rocm: str | None
    sglang_version: str | None
    sglang_tree: str | None
    sglang_pyproject: str | None
    nvcc_version: str | None
    cuda_home: str | None
    driver_stub: str | None
    rocm_version: str | None
    rocm_path: str | None
    archs: tuple | None
    distributions: dict  # canonical name -> version, recorded versions only
    unrecorded: tuple  # distributions the base holds at a version no record says
    records: dict

    @property
    def is_rocm(self) -> bool:
        return self.rocm_version is not None or self.rocm_path is not None


def _check_value(kind: str, value, file: str, key: str) -> None:
    """A fact's value by its kind; None is always allowed (its record says what was searched)."""
    if value is None:
        return
    if kind in ("platforms", "archs"):
        if not isinstance(value, list) or not value:
            raise SpecError(file, key, f"expected a non-empty list, got {short(value)}")
        pattern = PLATFORM_RE if kind == "platforms" else ARCH_RE
        for i, item in enumerate(value):
            if not isinstance(item, str) or not pattern.fullmatch(item):
                raise SpecError(file, f"{key}[{i}]", f"not a {kind[:-1]}: {short(item)}")
        return
    if not isinstance(value, str):
        raise SpecError(file, key, f"expected a string or null, got {type(value).__name__} {short(value)}")
    if kind == "version" and not pep440(value):
        raise SpecError(file, key, f"not a PEP 440 version: {short(value)}")
    if kind == "pyver" and not PY_VERSION_RE.fullmatch(value):
        raise SpecError(file, key, f"expected MAJOR.MINOR, got {short(value)}")
    if kind == "dotted" and not DOTTED_RE.fullmatch(value):
        raise SpecError(file, key, f"expected a release of digits and dots, got {short(value)}")
    if kind == "digest" and not DIGEST_RE.fullmatch(value):
        raise SpecError(file, key, f"expected sha256:<64 hex>, got {short(value)}")
    if kind == "path":
        check_abs_path(value, file, key)
    if kind == "relpath":
        check_rel_path(value, file, key)
    if kind == "command":
        check_python(value, file, key)


def _fact(raw: dict, key: str, kind: str, file: str, records: dict, required: bool = True):
    """The value of the fact at dotted `key` (checked), its record noted in `records`."""
    node: object = raw
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        if required:
            raise SpecError(file, key, "missing required fact ({value: ..., record: ...})")
        return None
    for req in ("value", "record"):
        if req not in node:  # type: ignore[operator]
            raise SpecError(file, key, f"missing required key {req!r}")
    record = node["record"]  # type: ignore[index]
    if not record.strip():
        raise SpecError(file, f"{key}.record", "empty: every fact names its public record (or what was searched)")
    if len(record) > MAX_RECORD or CONTROL_RE.search(record):
        raise SpecError(file, f"{key}.record", f"one line of at most {MAX_RECORD} characters, got {short(record)}")
    value = node["value"]  # type: ignore[index]
    _check_value(kind, value, file, f"{key}.value")
    records[key] = record
    return value


def load_file(path: Path) -> Base:
    """Parse and validate one base file."""
    file, raw = read_spec_file(path)
    check(raw, SCHEMA, file, "")
    for req in REQUIRED:
        if req not in raw:
            raise SpecError(file, req, "missing required key")
    check_image_ref(raw["image"], file, "image")
    if path.name != file_name(raw["image"]):
        raise SpecError(file, "image", f"the file for {short(raw['image'])} is named {file_name(raw['image'])!r}")
    if ("cuda" in raw) == ("rocm" in raw):
        raise SpecError(file, "cuda", "a base describes exactly one of `cuda` (its toolkit) or `rocm`")
    records: dict[str, str] = {}
    facts = {key: _fact(raw, key, kind, file, records) for key, kind in TOP.items()}
    for section, kinds in SECTIONS.items():
        if section in ("cuda", "rocm") and section not in raw:
            continue
        for name, kind in kinds.items():
            facts[f"{section}.{name}"] = _fact(raw, f"{section}.{name}", kind, file, records)
    if facts["python.version"] is None or facts["python.command"] is None:
        raise SpecError(file, "python.version", "a base must record its Python version and interpreter command")
    distributions, unrecorded = {}, []
    for name in raw["distributions"]:
        key = f"distributions.{name}"
        problem = pip_name_problem(name)
        if problem or canonicalize_name(name) != name:
            raise SpecError(file, short(key, 80, quote=False), problem or "write the canonical name (lower-case, '-')")
        version = _fact(raw, key, "version", file, records)
        if version is not None:
            distributions[name] = version
        else:
            unrecorded.append(name)
    return Base(
        image=raw["image"],
        file=file,
        digest=facts["digest"],
        platforms=tuple(facts["platforms"] or ()),
        glibc=facts["glibc"],
        python_version=facts["python.version"],
        python_full_version=facts["python.full_version"],
        python=facts["python.command"],
        site_packages=facts["python.site_packages"],
        torch_version=facts["torch.version"],
        torch_cuda=facts["torch.cuda"],
        torch_rocm=facts["torch.hip"],
        sglang_version=facts["sglang.version"],
        sglang_tree=facts["sglang.tree"],
        sglang_pyproject=facts["sglang.pyproject"],
        nvcc_version=facts.get("cuda.nvcc"),
        cuda_home=facts.get("cuda.home"),
        driver_stub=facts.get("cuda.driver_stub"),
        rocm_version=facts.get("rocm.version"),
        rocm_path=facts.get("rocm.path"),
        archs=tuple(facts["archs"]) if facts["archs"] is not None else None,
        distributions=distributions,
        unrecorded=tuple(unrecorded),
        records=records,
    )


def has_base(image_ref: str, bases_dir: Path = BASES_DIR) -> bool:
    """Whether `image_ref` is described by a base file (every GPU variant's base is: tests/unit/test_bases.py)."""
    return (bases_dir / file_name(image_ref)).is_file()


def load_base(image_ref: str, bases_dir: Path = BASES_DIR) -> Base:
    """The base file of `image_ref` (a spec's `base`); a reference without one is a usage error."""
    path = bases_dir / file_name(image_ref)
    if not path.is_file():
        raise UsageError(f"no base file for {image_ref}: expected {path.name} in {bases_dir}")
    return load_file(path)


def all_bases(bases_dir: Path = BASES_DIR) -> dict[str, Base]:
    """Every base file, by image reference."""
    return {b.image: b for b in (load_file(p) for p in sorted(bases_dir.glob("*.yaml")))}
