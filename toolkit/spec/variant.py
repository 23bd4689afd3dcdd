"""A variant's shape, declared once: each `Variant` field carries a `Key` saying what the spec may write there.

Everything else is read from the fields: the VARIANT, FAMILY and LAYER schemas, the keys a family must have, the
keys `--set` may change, what shapes the image (`as_dict`, hence the digest) and how a spec's values become a
`Variant` (`from_spec`). A new key is one field here; nothing else lists the keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkit.spec.schema import GATES, STEPS, STR_LIST, STR_MAP
from toolkit.steps import expand

# The tables' own schemas (toolkit/spec/schema.py's language). `requirements`: a requirements file in a git component's
# tree that a `requirements` step installs, less `exclude` (names). `record`: where the pin is recorded
# (tests/test_pin_records.py checks it). `track`: a policy, and then `ref` comes from the lock (toolkit/lock/policy.py).
COMPONENT = {
    "git": str,
    "ref": str,
    "subdir": str,
    "requirements": str,
    "exclude": STR_LIST,
    "record": str,
    "track": {"branch": str, "tag": str, "commit": str},
    "why": str,
}
# A file a build downloads by URL and checks by digest; its size and sha256 come from the lock.
ARTIFACT = {"url": str, "release": {"repo": str, "tag": str}, "why": str}
# `component`: the patch belongs to that git component's tree and is applied right after the tree is copied in.
# `package` (instead of `tree`): the tree is that installed package's folder, found in the image as pip placed it
# (importlib's find_spec, which does not import it), so no site-packages path is written in the spec.
PATCH = {"file": str, "tree": str, "package": str, "ref": str, "strip": int, "component": str}

# Where a key may be written: the family file, a variant under `variants:`, a layer (images/layers/*.yaml).
FAMILY_FILE, VARIANT_ENTRY, LAYER_FILE = "family", "variant", "layer"
ANYWHERE = (FAMILY_FILE, VARIANT_ENTRY, LAYER_FILE)
OVERRIDABLE = (FAMILY_FILE, VARIANT_ENTRY)


@dataclass(frozen=True)
class Key:
    """What one Variant field is in the spec. `where`: the places that may write it (none: the loader works it
    out). `settable`: `--set` may change it for one build. `shapes`: it is part of what the digest covers.
    `default`: the value when the spec leaves it out or empty (a callable gets the variant's name). `convert`: how
    the spec's value is stored (tuple for a list, dict for a copy; empty when the spec has none). `spec_key`: its
    name in the spec, if not the field's."""

    schema: Any = None
    where: tuple = ()
    required: bool = False  # a family must write it
    settable: bool = False
    shapes: bool = True
    default: Any = None
    convert: Callable | None = None
    spec_key: str = ""


def spec_field(key: Key, **kw):
    """A dataclass field carrying its Key, with the Key's default as the field's (`kw` may name another); a field
    with none is a required argument."""
    if not kw and key.convert is dict:
        kw = {"default_factory": dict}
    elif not kw and key.convert is tuple:
        kw = {"default": tuple(key.default or ())}
    elif not kw and key.default is not None and not callable(key.default):
        kw = {"default": key.default}
    return dataclasses.field(metadata={"key": key}, **kw)


@dataclass(frozen=True)
class Variant:
    """One buildable target, fully resolved (family defaults merged with the variant's overrides)."""

    name: str = spec_field(Key())
    spec_file: str = spec_field(Key(shapes=False))
    family: str = spec_field(Key(str, (FAMILY_FILE,), required=True))
    template: str = spec_field(Key(str, (FAMILY_FILE,), required=True))
    repository: str = spec_field(Key(str, (FAMILY_FILE,), required=True))
    # The family's default variant: its registry cache is this one's second source.
    family_default: str = spec_field(Key(str, (FAMILY_FILE,), required=True, shapes=False, spec_key="default"))
    python: str = spec_field(Key(str, (FAMILY_FILE,), required=True))
    base: str = spec_field(Key(str, OVERRIDABLE, required=True, settable=True))
    args: dict = spec_field(Key(STR_MAP, ANYWHERE, settable=True, convert=dict))
    env: dict = spec_field(Key(STR_MAP, ANYWHERE, settable=True, convert=dict))
    pip: dict = spec_field(Key(STR_MAP, ANYWHERE, settable=True, convert=dict))
    components: dict = spec_field(Key(("map", COMPONENT), ANYWHERE, settable=True, convert=dict))
    tag_suffix: str = spec_field(Key(str, (VARIANT_ENTRY,), settable=True, default=lambda name: name), default="")
    platforms: tuple = spec_field(Key(STR_LIST, OVERRIDABLE, settable=True, default=("linux/amd64",), convert=tuple))
    description: str = spec_field(Key(str, ANYWHERE, default=""))
    # The build's clock (BuildKit's SOURCE_DATE_EPOCH): the image's `created` time and every file time of its layers.
    # A fixed input, never the build host's clock, so two builds of one input give one digest; not in `--set`.
    source_date_epoch: int = spec_field(Key(int, (FAMILY_FILE, LAYER_FILE)), default=0)
    steps: tuple = spec_field(Key(STEPS, OVERRIDABLE, convert=tuple))
    gates: dict = spec_field(Key(GATES, OVERRIDABLE, convert=dict))
    patches: tuple = spec_field(Key(("list", PATCH), OVERRIDABLE, convert=tuple))
    base_build: dict = spec_field(
        Key(
            {"debootstrap": {"suite": str, "variant": str, "include": STR_LIST}},
            (FAMILY_FILE,),
            convert=dict,
        )
    )
    wheelhouse: dict = spec_field(
        Key(
            {
                "python_version": str,
                "platform": str,
                "constraints": str,
                # The wheels for the other platforms the family builds for (`--set platforms=...`), by platform.
                "other_platforms": ("map", {"platform": str, "constraints": str}),
                # What the image's Python holds beside the wheelhouse's pins and the bridge, each with its reason:
                # the inventory gate's set is derived from these and the constraints (toolkit/spec/inventory.py).
                "beside": ("map", {"version": str, "source": str, "why": str}),
            },
            (FAMILY_FILE,),
            convert=dict,
        )
    )
    # name -> its locked records (lock_policy.artifact_record)
    artifacts: dict = spec_field(Key(("map", ARTIFACT), (FAMILY_FILE, LAYER_FILE), convert=dict))
    # Upstream's tag names (`build.py build --image-tag dev|latest|custom`, toolkit/spec/upstream_tags.py): the image,
    # the word a dev tag starts with (upstream: "dev", "miles" on ROCm) and each variant's postfix. The variant
    # holds its own: image, dev_prefix, postfix (names only).
    upstream_tags: dict = spec_field(
        Key({"image": str, "dev_prefix": str, "postfix": STR_MAP}, (FAMILY_FILE,), shapes=False, convert=dict)
    )
    # NAME==VERSION -> the sha256s of its locked files on the variant's platforms (the lock's closure, else its `pip`
    # section)
    pip_files: dict = spec_field(Key(convert=dict))
    # What the image installs of its closure (the lock's `closure`): {platform: {name: {version, files}}}
    closure: dict = spec_field(Key(convert=dict))

    @classmethod
    def from_spec(cls, family: dict, values: dict, **resolved) -> Variant:
        """The variant from its family's mapping (layers merged in) and its own values (merged over the family
        defaults), each field by its Key; `resolved`: what the loader worked out (name, spec_file, steps, ...)."""
        out = {}
        for f, key in KEYS.items():
            if f in resolved:
                value = resolved[f]
            else:
                source = values if VARIANT_ENTRY in key.where else family
                value = source.get(key.spec_key or f)
                if not value:
                    value = key.default(resolved["name"]) if callable(key.default) else key.default
            out[f] = key.convert(value or ()) if key.convert else value
        return cls(**out)

    @property
    def digest(self) -> str:
        """sha256 of the resolved spec: changes exactly when something that shapes the image does."""
        data = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()

    def pins(self) -> dict:
        """The `pip` table as the image sees it: each name with its `${ARG}` references expanded."""
        return {expand(name, self.args): version for name, version in self.pip.items()}

    def as_dict(self) -> dict:
        """What shapes the image (where the spec lives and what tags name it do not)."""
        return {f: (list(v) if isinstance(v, tuple) else v) for f in SHAPES for v in [getattr(self, f)]}


KEYS: dict[str, Key] = {f.name: f.metadata["key"] for f in dataclasses.fields(Variant)}
SHAPES = tuple(f for f, key in KEYS.items() if key.shapes)
SETTABLE = tuple(f for f, key in KEYS.items() if key.settable)


def schema_for(place: str) -> dict:
    """{spec key: schema} of the keys `place` may write."""
    return {key.spec_key or f: key.schema for f, key in KEYS.items() if place in key.where}


VARIANT = schema_for(VARIANT_ENTRY)
LAYER = schema_for(LAYER_FILE)
# A family's own structure, which no variant holds: the layers it `extends`, its alias, its variants.
FAMILY = {**schema_for(FAMILY_FILE), "alias": str, "extends": STR_LIST, "variants": ("map", VARIANT)}
REQUIRED_FAMILY = (*(key.spec_key or f for f, key in KEYS.items() if key.required), "variants")
