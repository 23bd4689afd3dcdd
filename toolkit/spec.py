"""Load and validate the image specs in images/: one YAML file per family, each with named variants.

Validation happens once, on load, so every later stage can trust the data: an unknown key, a wrong type or an
unpinned base/component is reported as `images/rocm.yaml: variants.x.base: problem` and nothing else happens.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from toolkit.errors import SpecError, UsageError

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
VERSION_RE = re.compile(r"^[A-Za-z0-9_.+!-]+$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
PLATFORM_RE = re.compile(r"^linux/(amd64|arm64)$")
DIST_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508 names
REL_PATH_RE = re.compile(r"^(?!/)(?!.*(^|/)\.\.(/|$))[A-Za-z0-9._/-]+$")

# Schema: key -> type. A type is a python type, ("list", T), ("map", T) for str-keyed mappings, or a nested schema dict.
STR_MAP = ("map", str)
STR_LIST = ("list", str)
# `requirements`: a requirements file in a git component's tree that the image installs, less `exclude` (names).
COMPONENT = {"git": str, "ref": str, "version": str, "subdir": str, "extras": str, "requirements": str,
             "exclude": STR_LIST}
# `component`: the patch belongs to that git component's tree and is applied right after the tree is copied in.
PATCH = {"file": str, "tree": str, "ref": str, "strip": int, "component": str}
GATES = {
    "imports": STR_LIST,
    "compile": STR_LIST,
    "signatures": ("list", {"target": str, "resolve": str, "keywords": STR_LIST, "import": bool}),
    "platform": str,
    "pip_check": {"allow": ("list", {"match": str, "reason": str})},
    "provenance": STR_MAP,
    "commands": ("list", {"name": str, "argv": STR_LIST}),
}
VARIANT = {
    "description": str,
    "base": str,
    "platforms": STR_LIST,
    "tag_suffix": str,
    "args": STR_MAP,
    "env": STR_MAP,
    "components": ("map", COMPONENT),
    "pip": STR_MAP,
    "pip_no_deps": STR_MAP,  # installed without their dependencies (metadata that pins another platform's stack)
    "gates": GATES,
    "patches": ("list", PATCH),
}
FAMILY = {
    "family": str,
    "description": str,
    "template": str,
    "repository": str,
    "default": str,
    "alias": str,
    "python": str,
    "base_build": {"debootstrap": {"suite": str, "variant": str, "include": STR_LIST}},
    "wheelhouse": {"python_version": str, "platform": str, "constraints": str},
    "variants": ("map", VARIANT),
    **{k: v for k, v in VARIANT.items() if k not in ("tag_suffix",)},
}
REQUIRED_FAMILY = ("family", "template", "repository", "default", "python", "base", "variants")
PLATFORMS = ("rocm", "cuda", "cpu")


@dataclass(frozen=True)
class Variant:
    """One buildable target, fully resolved (family defaults merged with the variant's overrides)."""

    name: str
    family: str
    spec_file: str
    template: str
    repository: str
    python: str
    base: str
    platforms: tuple
    tag_suffix: str
    args: dict
    env: dict
    components: dict
    pip: dict
    gates: dict
    patches: tuple
    pip_no_deps: dict = field(default_factory=dict)
    description: str = ""
    base_build: dict = field(default_factory=dict)
    wheelhouse: dict = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """sha256 of the resolved spec: changes exactly when something that shapes the image does."""
        data = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if k != "spec_file"}


def _type_name(t) -> str:
    if isinstance(t, dict):
        return "mapping"
    if isinstance(t, tuple):
        return "list" if t[0] == "list" else "mapping"
    return {str: "string", int: "integer", bool: "boolean"}.get(t, t.__name__)


def check(value, schema, file: str, key: str) -> None:
    """Raise SpecError for the first value that does not fit the schema."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise SpecError(file, key, f"expected a mapping, got {type(value).__name__}")
        for k, v in value.items():
            sub = f"{key}.{k}" if key else str(k)
            if k not in schema:
                raise SpecError(file, sub, "unknown key")
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
            raise SpecError(file, key, f"expected a {_type_name(schema)}, got {type(value).__name__} {value!r}")


def check_image_ref(ref: str, file: str, key: str) -> None:
    """A base image is pinned when it names a tag other than `latest`, or a digest."""
    name, _, digest = ref.partition("@")
    if digest:
        if not DIGEST_RE.match(digest):
            raise SpecError(file, key, f"malformed digest in {ref!r}")
        return
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        raise SpecError(file, key, f"unpinned base image {ref!r}: name a tag or a digest")
    tag = last.split(":", 1)[1]
    if not tag or tag == "latest":
        raise SpecError(file, key, f"unpinned base image {ref!r}: 'latest' moves; name a fixed tag or a digest")


def check_pins(v: dict, file: str, prefix: str) -> None:
    if "base" in v:
        check_image_ref(v["base"], file, f"{prefix}base")
    for name, comp in (v.get("components") or {}).items():
        key = f"{prefix}components.{name}"
        if "git" in comp:
            if not COMMIT_RE.match(comp.get("ref", "")):
                raise SpecError(file, f"{key}.ref", f"git component must be pinned to a 40-hex commit, got {comp.get('ref')!r}")
        elif "version" in comp:
            if not VERSION_RE.match(comp["version"]):
                raise SpecError(file, f"{key}.version", f"bad version {comp['version']!r}")
        else:
            raise SpecError(file, key, "a component needs `git` + `ref` or `version`")
        req = comp.get("requirements")
        if req is not None and not REL_PATH_RE.match(req):
            raise SpecError(file, f"{key}.requirements", f"must be a relative path inside the tree, got {req!r}")
        for i, name in enumerate(comp.get("exclude") or []):
            if not DIST_NAME_RE.match(name):
                raise SpecError(file, f"{key}.exclude[{i}]", f"not a distribution name: {name!r}")
    for section in ("pip", "pip_no_deps"):
        for name, version in (v.get(section) or {}).items():
            if not VERSION_RE.match(version) or version in ("latest", "*"):
                raise SpecError(file, f"{prefix}{section}.{name}",
                                f"pip package must be pinned to an exact version, got {version!r}")
    for i, p in enumerate(v.get("platforms") or []):
        if not PLATFORM_RE.match(p):
            raise SpecError(file, f"{prefix}platforms[{i}]", f"unknown platform {p!r}")
    plat = (v.get("gates") or {}).get("platform")
    if plat is not None and plat not in PLATFORMS:
        raise SpecError(file, f"{prefix}gates.platform", f"must be one of {', '.join(PLATFORMS)}, got {plat!r}")
    for i, p in enumerate(v.get("patches") or []):
        for req in ("file", "tree"):
            if req not in p:
                raise SpecError(file, f"{prefix}patches[{i}]", f"missing required key {req!r}")
        if "ref" in p and not COMMIT_RE.match(p["ref"]):
            raise SpecError(file, f"{prefix}patches[{i}].ref", f"must be a 40-hex commit, got {p['ref']!r}")


def merge(base: dict, over: dict) -> dict:
    """Variant overrides: mappings merge key by key, everything else (lists, scalars) replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_family(path: Path) -> dict[str, Variant]:
    """Parse and validate one family file; return its variants by name."""
    return _parse_family(path)[1]


def _parse_family(path: Path) -> tuple[dict, dict[str, Variant]]:
    """(the raw mapping, its validated variants by name)."""
    file = path_label(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise SpecError(file, "", f"{where}invalid YAML: {getattr(e, 'problem', e)}") from None
    except OSError as e:
        raise SpecError(file, "", f"cannot read: {e.strerror}") from None
    check(raw, FAMILY, file, "")
    for req in REQUIRED_FAMILY:
        if req not in raw:
            raise SpecError(file, req, "missing required key")
    if raw["family"] != path.stem:
        raise SpecError(file, "family", f"must match the file name {path.stem!r}, got {raw['family']!r}")
    if not (ROOT / "templates" / raw["template"]).is_file():
        raise SpecError(file, "template", f"no such template templates/{raw['template']}")
    if raw["default"] not in raw["variants"]:
        raise SpecError(file, "default", f"names no variant: {raw['default']!r}")
    check_pins(raw, file, "")
    family_defaults = {k: v for k, v in raw.items() if k in VARIANT}
    variants = {}
    for name, over in raw["variants"].items():
        if not NAME_RE.match(name):
            raise SpecError(file, f"variants.{name}", "variant names are lower-case letters, digits, '.', '_', '-'")
        over = over or {}
        check_pins(over, file, f"variants.{name}.")
        v = merge(family_defaults, over)
        variants[name] = Variant(
            name=name,
            family=raw["family"],
            spec_file=file,
            template=raw["template"],
            repository=raw["repository"],
            python=raw["python"],
            base=v["base"],
            platforms=tuple(v.get("platforms") or ["linux/amd64"]),
            tag_suffix=over.get("tag_suffix", name),
            args=dict(v.get("args") or {}),
            env=dict(v.get("env") or {}),
            components=dict(v.get("components") or {}),
            pip=dict(v.get("pip") or {}),
            pip_no_deps=dict(v.get("pip_no_deps") or {}),
            gates=dict(v.get("gates") or {}),
            patches=tuple(v.get("patches") or ()),
            description=v.get("description", ""),
            base_build=dict(raw.get("base_build") or {}),
            wheelhouse=dict(raw.get("wheelhouse") or {}),
        )
    return raw, variants


def path_label(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Catalog:
    """Every family and variant, plus the aliases (`rocm`, `cuda`, `smoke`) users type."""

    variants: dict
    aliases: dict
    families: dict

    def resolve(self, target: str) -> Variant:
        name = self.aliases.get(target, target)
        if name not in self.variants:
            known = ", ".join(sorted(set(self.variants) | set(self.aliases)))
            raise UsageError(f"unknown target {target!r}; known targets: {known}")
        return self.variants[name]


def load_catalog(images_dir: Path = IMAGES_DIR) -> Catalog:
    variants, aliases, families = {}, {}, {}
    for path in sorted(images_dir.glob("*.yaml")):
        raw, fam = _parse_family(path)
        families[raw["family"]] = sorted(fam)
        for name, v in fam.items():
            if name in variants:
                raise SpecError(path_label(path), f"variants.{name}", f"also defined in {variants[name].spec_file}")
            variants[name] = v
        for alias in {raw["family"], raw.get("alias", raw["family"])}:
            if alias not in fam:
                aliases[alias] = raw["default"]
    if not variants:
        raise UsageError(f"no image specs found in {images_dir}")
    return Catalog(variants=variants, aliases=aliases, families=families)
