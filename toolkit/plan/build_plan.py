"""Turn a resolved variant (plus command-line choices) into a build plan: everything a build needs, decided once.

The plan is plain data. Rendering, staging the context, building and gating all read it; none of them decide
anything the plan could have decided.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

from toolkit.errors import SpecError, UsageError, short
from toolkit.plan.artifacts import WHEELS
from toolkit.plan.sources import apply_refs, parse_overrides, used_wheels
from toolkit.spec.catalog import ROOT, check_pins
from toolkit.spec.schema import check
from toolkit.spec.values import local_base_problem, text_problem
from toolkit.spec.variant import SETTABLE, VARIANT, Variant
from toolkit.steps import Where, check_steps

SECRET_PIP_CA = "pip-ca"
SECRET_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

REVISION_LABEL = "org.opencontainers.image.revision"  # the toolkit commit that built an image


@dataclass(frozen=True)
class Plan:
    variant: Variant
    image: str  # repository:tag the build moves on success
    secrets: tuple = ()  # (id, src) pairs handed to BuildKit, never written into the context
    labels: dict = field(default_factory=dict)  # applied at build time (they change with every commit)
    no_cache: bool = False
    progress: str = "auto"
    sources: dict = field(default_factory=dict)  # git component -> local folder or tarball (`--source`)
    wheels: tuple = ()  # the wheel files of `--source wheels=DIR`, by name (toolkit/plan/artifacts.py)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def gates(self) -> dict:
        """The verify/ runner's config (its JSON format is the spec's `gates` mapping as is)."""
        return self.variant.gates


def check_constraint_pins(variant: Variant) -> None:
    """A wheelhouse with wheels for several platforms renders package names only (toolkit/steps/pip.py): the home
    platform's constraints must then pin exactly the `pip` table's versions, or a pin (a `--set pip.X=V`
    included) would never reach the image. Refused, exit 2, naming the pin."""
    from packaging.utils import canonicalize_name

    from toolkit.spec.catalog import IMAGES_DIR, constraint_pins

    w = variant.wheelhouse
    if not (w.get("other_platforms") and w.get("constraints")):
        return
    pinned = constraint_pins(IMAGES_DIR / w["constraints"])
    for name, version in variant.pins().items():
        have = pinned.get(canonicalize_name(name.split("[")[0]))
        if have is None or have.split("+")[0] != version:
            raise SpecError(
                variant.spec_file,
                f"pip.{short(name, 60, quote=False)}",
                f"{version} is not what {w['constraints']} pins ({have or 'nothing'}); with wheels for several "
                "platforms each platform's constraints file holds the versions: change it there",
            )


def apply_sets(variant: Variant, sets: list[str]) -> Variant:
    """`--set args.MAX_JOBS=8`, `--set base=img:tag`: dotted overrides, validated like the spec itself."""
    if not sets:
        return variant
    data = check_set_values(variant, sets)
    file = set_label(variant)
    # A pin or component a --set adds must be installed by a step, like one the spec declares.
    check_steps(
        variant.steps,
        {**variant.as_dict(), **data},
        Where(file, "steps"),
        lambda table, name: (file, f"{table}.{name}"),
    )
    data["platforms"] = tuple(data["platforms"])
    return dataclasses.replace(variant, **data)


def set_label(variant: Variant) -> str:
    return f"--set ({variant.spec_file} variants.{variant.name})"


def check_set_values(variant: Variant, sets: list[str]) -> dict:
    """The settable values with the sets applied, each set value checked once, where it enters: by its key's
    schema and patterns (over only the entries the sets touch: the variant's own values passed on load), then as
    text (what no Dockerfile line can hold, whatever the key). The variant given stays as it was."""
    data = copy.deepcopy({k: getattr(variant, k) for k in SETTABLE})
    data["platforms"] = list(data["platforms"])
    file = set_label(variant)
    touched: dict[str, set | None] = {}  # key -> the entries set, or None: the whole value
    given = []  # (key, value) of each set, for the text check
    for item in sets:
        key, eq, value = item.partition("=")
        given.append((key, value))
        parts = key.split(".")
        if not eq or not key or parts[0] not in SETTABLE:
            raise UsageError(f"--set {short(item)}: expected KEY=VALUE with KEY one of {', '.join(SETTABLE)} (dotted)")
        if parts[0] == "components" and len(parts) > 2 and parts[2] in ("track", "why"):
            raise UsageError(
                f"--set {short(key)}: a component's policy is the spec's and its lock's (edit the spec, run "
                "`build.py lock`); for one build, give `--ref NAME=COMMIT`"
            )
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise UsageError(f"--set {short(item)}: {short(p, quote=False)} is not a mapping")
        node[parts[-1]] = value.split(",") if parts == ["platforms"] else value
        entries = touched.setdefault(parts[0], set())
        if len(parts) == 1:
            touched[parts[0]] = None
        elif entries is not None:
            entries.add(parts[1])
    new = {}
    for k in (k for k in data if k in touched):  # in SETTABLE's order, like the spec's own check
        entries = touched[k]
        if entries is None or not isinstance(data[k], dict):
            new[k] = data[k]
        else:
            new[k] = {e: v for e, v in data[k].items() if e in entries}
    check(new, {k: VARIANT[k] for k in new}, file, "")
    check_pins(new, file, "", args=data["args"])
    for key, value in given:
        problem = text_problem(value)
        if problem:
            raise SpecError(file, short(key, 80, quote=False), problem)
    if "base" in new and variant.base_build and local_base_problem(data["base"]):
        raise SpecError(file, "base", local_base_problem(data["base"]))
    return data


def source_revision() -> str:
    """The project's git commit (with `-dirty` when the work tree has changes), for the OCI revision label."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        return rev.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make_plan(
    variant: Variant,
    *,
    tag=None,
    sets=(),
    secrets=(),
    pip_ca=None,
    no_cache=False,
    progress="auto",
    revision=None,
    refs=(),
    sources=(),
) -> Plan:
    """`refs` and `sources`: `--ref` and `--source` items as given, handed to toolkit/plan/sources.py here only."""
    variant = apply_sets(apply_refs(variant, refs, sources), list(sets))
    check_constraint_pins(variant)
    overrides = parse_overrides(sources, variant)
    wheels = used_wheels(overrides[WHEELS], variant) if WHEELS in overrides else ()
    all_secrets = list(secrets)
    if pip_ca and not any(sid == SECRET_PIP_CA for sid, _ in all_secrets):
        all_secrets.append((SECRET_PIP_CA, str(pip_ca)))
    labels = {
        REVISION_LABEL: revision or source_revision(),
        "org.opencontainers.image.source": "miles-image-toolkit",
    }
    return Plan(
        variant=variant,
        # An empty --tag (an unset CI variable) is a bad tag, refused by the caller, never the default.
        image=f"{variant.repository}:{variant.tag_suffix}" if tag is None else tag,
        secrets=tuple(all_secrets),
        labels=labels,
        no_cache=no_cache,
        progress=progress,
        sources={name: str(path) for name, path in overrides.items()},
        wheels=wheels,
    )


@functools.lru_cache(maxsize=1)
def _pip_config_listing() -> str:
    """`pip config list` of the host, asked once per process (a subprocess that takes about a second)."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def host_pip_setting(env: str, name: str) -> str | None:
    """A setting of the host's pip: its environment variable, else the last `pip config list` entry named `name`."""
    value = os.environ.get(env)
    if value:
        return value
    for line in _pip_config_listing().splitlines():
        key, _, found = line.partition("=")
        if key.rsplit(".", 1)[-1] == name:
            value = found.strip().strip("'\"")
    return value or None


def host_pip_ca():
    """The CA bundle the host's pip trusts (PIP_CERT or pip config), if any: builds need it behind a TLS proxy."""
    cert = host_pip_setting("PIP_CERT", "cert")
    return cert if cert and os.path.isfile(cert) else None


def parse_secret(text: str) -> tuple:
    """`id=NAME,src=FILE` as docker build takes it; FILE must exist now (bad usage, before anything is written)."""
    fields = dict(part.partition("=")[::2] for part in text.split(","))
    sid, src = fields.get("id"), fields.get("src") or fields.get("source")
    if not sid or not src or set(fields) - {"id", "src", "source", "type"}:
        raise UsageError(f"--secret {short(text)}: expected id=NAME,src=FILE")
    if not SECRET_ID_RE.fullmatch(sid):
        raise UsageError(f"--secret {short(text)}: the id is letters, digits, '.', '_', '-'")
    if not os.path.isfile(src):
        raise UsageError(f"--secret {short(text)}: no such file {short(src)}")
    return sid, src
