"""Load and validate the image specs in images/: one YAML file per family, each with named variants.

The keys a spec may hold, and where, are declared once, on the `Variant` fields (toolkit/spec/variant.py); this module
reads the files, merges the layers and family defaults under each variant and checks the values. Validation
happens once, on load, so every later stage can trust the data: an unknown key, a wrong type or an
unpinned base/component is reported as `images/rocm.yaml: variants.x.base: problem` and nothing else happens.
Every value that reaches a Dockerfile is checked by type and by pattern (names as identifiers, pip names and
versions by PEP 508/440, image references by their grammar, paths as normalised absolute paths), so a value can
never become an instruction or a shell command; the templates quote what remains as a second line of defence.
"""

from __future__ import annotations

import copy
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name

from toolkit.errors import SpecError, UsageError, short
from toolkit.lock.policy import fill_from_lock
from toolkit.spec import start_imports
from toolkit.spec.inventory import check_beside
from toolkit.spec.schema import check
from toolkit.spec.values import (
    COMMIT_RE,
    CONTROL_RE,
    DEBIAN_NAME_RE,
    GIT_URL_RE,
    IDENT_RE,
    IMAGE_NAME_RE,
    NAME_RE,
    PLATFORM_RE,
    PY_VERSION_RE,
    WHEEL_PLATFORM_RE,
    check_abs_path,
    check_image_ref,
    check_python,
    check_rel_path,
    check_tag,
    local_base_problem,
    pep440,
    pip_name_problem,
)
from toolkit.spec.variant import FAMILY, LAYER, REQUIRED_FAMILY, VARIANT, Variant
from toolkit.spec.yaml_file import AliasBomb, check_keys, load_yaml
from toolkit.steps import Where, check_steps, expand, normalize

ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = ROOT / "images"

MAX_SPEC_BYTES = 1 << 20


def check_pins(v: dict, file: str, prefix: str, args: dict | None = None) -> None:
    """The patterns of a variant's values (`args`: what the pip names expand with, if not `v`'s own)."""
    if "base" in v:
        check_image_ref(v["base"], file, f"{prefix}base")
    for name, comp in (v.get("components") or {}).items():
        key = f"{prefix}components.{name}"
        if not IDENT_RE.fullmatch(name):
            raise SpecError(file, short(key, 80, quote=False), "component names are identifiers")
        if "git" in comp:
            if not GIT_URL_RE.fullmatch(comp["git"]):
                raise SpecError(file, f"{key}.git", f"not a git URL (scheme://host/path): {short(comp['git'])}")
            if "track" not in comp and not COMMIT_RE.fullmatch(comp.get("ref", "")):  # a policy: the lock pins it
                raise SpecError(
                    file, f"{key}.ref", f"git component must be pinned to a 40-hex commit, got {short(comp.get('ref'))}"
                )
        else:
            raise SpecError(file, key, "a component needs `git` and `ref`")
        if "subdir" in comp:
            check_rel_path(comp["subdir"], file, f"{key}.subdir")
        if "requirements" in comp:
            check_rel_path(comp["requirements"], file, f"{key}.requirements")
        for i, name in enumerate(comp.get("exclude") or []):
            problem = pip_name_problem(name)
            if problem:
                raise SpecError(file, f"{key}.exclude[{i}]", problem)
    for section in ("pip",):
        for name, version in (v.get(section) or {}).items():
            problem = pip_name_problem(expand(name, (v.get("args") if args is None else args) or {}))
            if problem:
                raise SpecError(file, short(f"{prefix}{section}.{name}", 80, quote=False), problem)
            if not pep440(version) or version in ("latest", "*"):
                raise SpecError(
                    file,
                    f"{prefix}{section}.{name}",
                    f"pip package must be pinned to an exact version, got {short(version)}",
                )
    for i, p in enumerate(v.get("platforms") or []):
        if not PLATFORM_RE.fullmatch(p):
            raise SpecError(file, f"{prefix}platforms[{i}]", f"unknown platform {short(p)}")
        if p in (v.get("platforms") or [])[:i]:
            raise SpecError(file, f"{prefix}platforms[{i}]", f"{short(p)} is named twice")
    for i, p in enumerate(v.get("patches") or []):
        if "file" not in p:
            raise SpecError(file, f"{prefix}patches[{i}]", "missing required key 'file'")
        if ("tree" in p) == ("package" in p):
            raise SpecError(
                file, f"{prefix}patches[{i}]", "exactly one of `tree` (a path) or `package` (an import name)"
            )
        if "package" in p and not IDENT_RE.fullmatch(p["package"]):
            raise SpecError(
                file, f"{prefix}patches[{i}].package", f"a top-level import name, got {short(p['package'])}"
            )
        if "ref" in p and not COMMIT_RE.fullmatch(p["ref"]):
            raise SpecError(file, f"{prefix}patches[{i}].ref", f"must be a 40-hex commit, got {short(p['ref'])}")
        check_repo_file(p["file"], file, f"{prefix}patches[{i}].file")
        if "tree" in p:
            check_abs_path(p["tree"], file, f"{prefix}patches[{i}].tree")
        if not 0 <= p.get("strip", 1) <= 9:
            raise SpecError(file, f"{prefix}patches[{i}].strip", f"must be 0..9, got {p['strip']}")
    for kind in ("args", "env"):
        for name, value in (v.get(kind) or {}).items():
            if not IDENT_RE.fullmatch(name):
                raise SpecError(
                    file,
                    short(f"{prefix}{kind}.{name}", 80, quote=False),
                    "names are identifiers (letters, digits, '_'; not starting with a digit)",
                )
            if CONTROL_RE.search(value):
                raise SpecError(
                    file, f"{prefix}{kind}.{name}", f"control character (newline, tab, ...) in {short(value)}"
                )
    if "tag_suffix" in v:
        check_tag(v["tag_suffix"], file, f"{prefix}tag_suffix")


def check_repo_file(path: str, file: str, key: str, under: Path = ROOT) -> None:
    """A file the build reads from the repository (a patch, a template): inside `under`, never a host file."""
    check_rel_path(path, file, key)
    resolved = (under / path).resolve()
    if not resolved.is_relative_to(under.resolve()) or not under.resolve().is_relative_to(under.parent.resolve()):
        raise SpecError(file, key, f"leaves the repository (through a link): {short(path)}")
    if not resolved.is_file():
        raise SpecError(file, key, f"no such file in the repository: {short(path)}")


def constraint_pins(path: Path) -> dict:
    """{canonical name: version} of a constraints file's `name==version` lines."""
    pins = {}
    for line in path.read_text().splitlines():
        name, eq, version = line.split("#", 1)[0].strip().partition("==")
        if eq:
            pins[canonicalize_name(name)] = version.strip()
    return pins


TAG_WORD_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


# The latest SOURCE_DATE_EPOCH accepted: 2106-02-07, the end of the 32-bit unsigned time tar and zip headers hold.
MAX_EPOCH = 2**32 - 1


def check_source_date_epoch(raw: dict, file: str) -> None:
    """Every family fixes its build clock (the family file or a layer it extends): no image takes the host's."""
    epoch = raw.get("source_date_epoch")
    if epoch is None:
        raise SpecError(file, "source_date_epoch", "missing required key (the family file or a layer it extends)")
    if not 0 < epoch <= MAX_EPOCH:
        raise SpecError(file, "source_date_epoch", f"a Unix time from 1 to {MAX_EPOCH}, got {short(epoch)}")


def check_family_values(raw: dict, file: str) -> None:
    """The family-level values that are not variant values (check_pins covers those)."""
    check_repo_file(raw["template"], file, "template", ROOT / "templates")
    check_python(raw["python"], file, "python")
    m = IMAGE_NAME_RE.fullmatch(raw["repository"])
    if m is None or len(raw["repository"]) > 255:
        raise SpecError(file, "repository", f"not an image name (lower-case, no tag): {short(raw['repository'])}")
    for key in ("default", "alias"):
        if key in raw and not NAME_RE.fullmatch(raw[key]):
            raise SpecError(file, key, f"not a target name: {short(raw[key])}")
    scheme = raw.get("upstream_tags")
    if scheme is not None:
        m = IMAGE_NAME_RE.fullmatch(scheme.get("image", ""))
        if m is None:
            raise SpecError(file, "upstream_tags.image", f"not an image name (no tag): {short(scheme.get('image'))}")
        words = [("upstream_tags.dev_prefix", scheme.get("dev_prefix", "dev"))]
        for variant, postfix in (scheme.get("postfix") or {}).items():
            if variant not in (raw.get("variants") or {}):
                raise SpecError(file, f"upstream_tags.postfix.{short(variant, 40, quote=False)}", "no such variant")
            words.append((f"upstream_tags.postfix.{variant}", "x" + postfix))
        for key, word in words:
            if not TAG_WORD_RE.fullmatch(word):
                raise SpecError(file, key, f"not a tag word (letters, digits, '_.-'): {short(word)}")
    boot = (raw.get("base_build") or {}).get("debootstrap") or {}
    for key in ("suite", "variant"):
        if key in boot and not DEBIAN_NAME_RE.fullmatch(boot[key]):
            raise SpecError(file, f"base_build.debootstrap.{key}", f"not a Debian name: {short(boot[key])}")
    for i, pkg in enumerate(boot.get("include") or []):
        if not DEBIAN_NAME_RE.fullmatch(pkg):
            raise SpecError(file, f"base_build.debootstrap.include[{i}]", f"not a Debian package name: {short(pkg)}")
    wheels = raw.get("wheelhouse") or {}
    if wheels:
        for req in ("python_version", "platform"):
            if req not in wheels:
                raise SpecError(file, f"wheelhouse.{req}", "missing required key")
        if not PY_VERSION_RE.fullmatch(wheels["python_version"]):
            raise SpecError(
                file, "wheelhouse.python_version", f"expected MAJOR.MINOR, got {short(wheels['python_version'])}"
            )
        if not WHEEL_PLATFORM_RE.fullmatch(wheels["platform"]):
            raise SpecError(file, "wheelhouse.platform", f"not a wheel platform tag: {short(wheels['platform'])}")
        if "constraints" in wheels:
            check_repo_file(wheels["constraints"], file, "wheelhouse.constraints", IMAGES_DIR)
        for platform, other in (wheels.get("other_platforms") or {}).items():
            key = f"wheelhouse.other_platforms.{short(platform, 40, quote=False)}"
            if not PLATFORM_RE.fullmatch(platform):
                raise SpecError(file, key, f"unknown platform {short(platform)}")
            if not WHEEL_PLATFORM_RE.fullmatch(other.get("platform", "")):
                raise SpecError(file, f"{key}.platform", f"not a wheel platform tag: {short(other.get('platform'))}")
            if "constraints" in other:
                check_repo_file(other["constraints"], file, f"{key}.constraints", IMAGES_DIR)
                pinned = constraint_pins(IMAGES_DIR / other["constraints"])
                for name in raw.get("pip") or {}:  # a name that is not one is refused with the pins
                    if pip_name_problem(name) is None and canonicalize_name(name) not in pinned:
                        raise SpecError(file, f"{key}.constraints", f"pins no version of {short(name)} (pip)")


def check_gates(gates: dict, pip: dict | None, components: dict | None, file: str, key: str) -> None:
    """The gate config by verify/'s own schema (the one the runner applies in the image), plus coverage: every
    image installs the bridge, so its gates import it and call its attention function (the probe); packages
    declared means `pip check` runs over them."""
    from verify.config import ConfigError, from_dict

    probe = "probes/bridge_attention.py"  # verify/probes/: calls the bridge's attention, forward and backward
    try:
        cfg = from_dict(gates, file)
    except ConfigError as e:
        raise SpecError(file, f"{key}.{e.key}" if e.key else key, e.problem or str(e)) from None
    from toolkit.render.gate_bundle import probe_problem
    from toolkit.spec import inventory
    from verify.kinds.commands import probe_of

    if inventory.KEY in gates:
        raise SpecError(
            file,
            f"{key}.{inventory.KEY}",
            "is derived from wheelhouse.constraints, wheelhouse.beside and the bridge, never written by hand",
        )

    for kind in ("commands", "gpu_commands"):
        for i, command in enumerate(cfg[kind]):
            name = probe_of(command.argv)
            problem = probe_problem(name) if name is not None else None
            if problem is not None:
                raise SpecError(file, f"{key}.{kind}[{i}].argv[1]", problem)
    if "sglang_attn_bridge" not in cfg["imports"]:
        raise SpecError(file, f"{key}.imports", "must import sglang_attn_bridge (every image installs the bridge)")
    if not any(c.argv[:2] == ["{python}", probe] for c in cfg["commands"]):  # run as the image Python's script
        raise SpecError(
            file,
            f"{key}.commands",
            f'must run {probe} as the script of the image\'s Python (["{{python}}", "{probe}", ...]: every '
            "image installs the bridge, its attention must run, forward and backward)",
        )
    if (pip or components) and "pip_check" not in cfg:
        raise SpecError(
            file,
            f"{key}.pip_check",
            "the variant declares packages: `pip check` must run over them (pip_check: {allow: []})",
        )


def merge(base: dict, over: dict) -> dict:
    """Variant overrides: mappings merge key by key, everything else (lists, scalars) replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_family(path: Path, lock: dict | None = None) -> dict[str, Variant]:
    """Parse and validate one family file; return its variants by name."""
    return _parse_family(path, lock)[1]


def read_spec_file(path: Path) -> tuple[str, dict]:
    """(its label, the mapping) of a spec or layer file, read safely: any problem is one SpecError line."""
    file = path_label(path)
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(file, "", f"larger than {MAX_SPEC_BYTES} bytes; refusing to parse it")
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise SpecError(file, "", f"{where}invalid YAML: {getattr(e, 'problem', e)}") from None
    except (AliasBomb, RecursionError) as e:
        raise SpecError(file, "", f"refusing the YAML: {e or 'nested too deeply'}") from None
    except OSError as e:
        raise SpecError(file, "", f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(file, "", "not UTF-8 text") from None
    check_keys(raw, file, "")
    if not isinstance(raw, dict):
        raise SpecError(file, "", f"expected a mapping, got {type(raw).__name__}")
    return file, raw


def load_layers(names: list, images_dir: Path, file: str) -> list[tuple[str, dict]]:
    """The layers a family `extends`, in order, each validated against LAYER: (label, mapping) pairs."""
    layers = []
    for i, name in enumerate(names):
        check_repo_file(name, file, f"extends[{i}]", images_dir / "layers")
        label, raw = read_spec_file((images_dir / "layers" / name).resolve())
        check(raw, LAYER, label, "")
        check_pins(raw, label, "")
        layers.append((label, raw))
    return layers


def with_layers(raw: dict, layers: list) -> dict:
    """The family's mapping with its layers' tables merged under its own (the family's values win)."""
    under: dict = {}
    for _, layer in layers:
        under = merge(under, {k: v for k, v in layer.items() if k != "description"})
    return merge(under, raw)


def read_family(path: Path) -> tuple[dict, str]:
    """(the family's mapping with its layers merged in, its label): what the lock reads its policies from."""
    file, raw = read_spec_file(path)
    check(raw, FAMILY, file, "")
    return with_layers(raw, load_layers(raw.get("extends") or [], path.parent, file)), file


def _parse_family(path: Path, lock: dict | None = None) -> tuple[dict, dict[str, Variant]]:
    """(the raw mapping, its validated variants by name)."""
    file, raw = read_spec_file(path)
    check(raw, FAMILY, file, "")
    for req in REQUIRED_FAMILY:
        if req not in raw:
            raise SpecError(file, req, "missing required key")
    if not NAME_RE.fullmatch(raw["family"]):
        raise SpecError(
            file, "family", f"family names are lower-case letters, digits, '.', '_', '-': {short(raw['family'])}"
        )
    if raw["family"] != path.stem:
        raise SpecError(file, "family", f"must match the file name {path.stem!r}, got {short(raw['family'])}")
    check_family_values(raw, file)
    if raw["default"] not in raw["variants"]:
        raise SpecError(file, "default", f"names no variant: {short(raw['default'])}")
    layers = load_layers(raw.get("extends") or [], path.parent, file)
    own, raw = raw, with_layers(raw, layers)
    check_source_date_epoch(raw, file)
    fill_from_lock(raw, path, file, lock)  # `lock`: one `build.py lock` has resolved but not yet written
    family_defaults = {k: v for k, v in raw.items() if k in VARIANT}
    check_pins(family_defaults, file, "")
    if "gates" in raw:
        gates = start_imports.expand(raw["gates"], file, "gates")
        check_gates(gates, family_defaults.get("pip"), family_defaults.get("components"), file, "gates")
    family_steps = [normalize(s, Where(file, f"steps[{i}]")) for i, s in enumerate(raw.get("steps") or [])]
    pip_section, closure_section, lock_label = _lock_pip_sections(path, file, raw, lock)
    variants = {}
    for name, over in raw["variants"].items():
        if not NAME_RE.fullmatch(name):
            raise SpecError(
                file,
                short(f"variants.{name}", 80, quote=False),
                "variant names are lower-case letters, digits, '.', '_', '-'",
            )
        over = over or {}
        v = merge(family_defaults, over)
        v["artifacts"] = raw.get("artifacts") or {}
        if "tag_suffix" not in over:
            check_tag(name, file, f"variants.{name}")
        gates_key = f"variants.{name}.gates" if "gates" in over else "gates"
        if v.get("gates"):
            v["gates"] = start_imports.expand(v["gates"], file, gates_key)
        check_gates(v.get("gates") or {}, v.get("pip"), v.get("components"), file, gates_key)
        git_names = {n for n, c in (v.get("components") or {}).items() if "git" in c}
        by_name: dict[str, str] = {}
        for i, p in enumerate(v.get("patches") or ()):
            key = f"variants.{name}.patches[{i}]" if "patches" in over else f"patches[{i}]"
            if "component" in p and p["component"] not in git_names:
                raise SpecError(file, f"{key}.component", f"names no git component: {short(p['component'])}")
            first = by_name.setdefault(posixpath.basename(p["file"]), p["file"])
            if first != p["file"]:
                raise SpecError(
                    file,
                    f"{key}.file",
                    f"the same file name as {short(first)} (the build context holds patches by name)",
                )
        if "steps" in over:
            steps = [normalize(s, Where(file, f"variants.{name}.steps[{i}]")) for i, s in enumerate(over["steps"])]
            steps_key = f"variants.{name}.steps"
        else:
            steps, steps_key = family_steps, "steps"
        check_pins(v, file, f"variants.{name}.")
        if raw.get("base_build") and local_base_problem(v["base"]):
            key = f"variants.{name}.base" if "base" in over else "base"
            raise SpecError(file, key, local_base_problem(v["base"]))
        origin = _origin_finder(file, name, own, over, layers)
        check_steps(steps, v, Where(file, steps_key), origin)
        check_beside(raw.get("wheelhouse") or {}, steps, file)
        _add_inventory_gate(v, raw.get("wheelhouse") or {}, file, gates_key)
        closure = _locked_closure(closure_section.get(name) or {}, v, name, lock_label)
        pip_files = _locked_pip_files(pip_section, closure, v)
        variants[name] = Variant.from_spec(
            raw,
            v,
            name=name,
            spec_file=file,
            steps=steps,
            upstream_tags=upstream_tags_of(raw, name),
            pip_files=pip_files,
            closure=closure,
        )
    return raw, variants


def _add_inventory_gate(v: dict, wheelhouse: dict, file: str, gates_key: str) -> None:
    """The derived `inventory` gate (toolkit/spec/inventory.py) joins the variant's gates, checked by the runner's
    own schema like every other key."""
    from toolkit.spec.inventory import KEY, gate_config
    from verify.config import ConfigError, from_dict

    derived = gate_config(wheelhouse)
    if derived is None:
        return
    try:
        from_dict({KEY: derived}, file)
    except ConfigError as e:
        raise SpecError(file, f"{gates_key}.{e.key}" if e.key else gates_key, e.problem or str(e)) from None
    v["gates"] = {**(v.get("gates") or {}), KEY: derived}


def _lock_pip_sections(path: Path, file: str, raw: dict, lock: dict | None) -> tuple[dict, dict, str]:
    """The family lock's `pip` and `closure` sections (the lock a `build.py lock` run holds, else the file's) and
    the lock's label; a family that makes its base locally or installs from a wheelhouse has none."""
    from toolkit.lock import file as lock_file

    lpath = lock_file.lock_path(path)
    label = str(Path(file).with_name(lpath.name))
    if raw.get("base_build") or raw.get("wheelhouse"):
        return {}, {}, label
    if lock is None:
        lock = lock_file.load(lpath, label, raw["family"]) or {}
    return lock.get("pip") or {}, lock.get("closure") or {}, label


def _locked_closure(places: dict, v: dict, name: str, label: str) -> dict:
    """The distributions the variant's image installs from its closure, per platform: {platform: {name: {version,
    files}}}; empty unless the lock holds a closure for every one of its platforms."""
    from toolkit.lock.pip_closure import installs
    from toolkit.spec.bases import load_base

    if not places:
        return {}
    python = load_base(v["base"]).python_version
    platforms = v.get("platforms") or ["linux/amd64"]
    wanted = [f"py{python} {p}" for p in platforms]
    if sorted(places) != sorted(wanted):
        raise SpecError(
            label,
            f"closure.{name}",
            f"holds {', '.join(sorted(places))}; the variant builds {', '.join(wanted)} (run `build.py lock`)",
        )
    records = [places[w] for w in wanted]
    if not all(installs(rec) for rec in records):
        return {}
    return {
        p: {n: {k: rec["packages"][n][k] for k in ("version", "files")} for n in installs(rec)}
        for p, rec in zip(platforms, records)
    }


def _locked_pip_files(section: dict, closure: dict, v: dict) -> dict:
    """The sha256s a GPU variant's exact pins install with: {NAME==VERSION: [sha256, ...]}, from the closure's
    files of that distribution and version where the lock holds a closure, else from the `pip` section; only for
    pins locked on every one of its platforms (a pending pin installs by name and version)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from toolkit.spec.bases import load_base

    platforms = v.get("platforms") or ["linux/amd64"]
    out = {}
    if closure:
        for name, version in (v.get("pip") or {}).items():
            pin = f"{expand(name, v.get('args') or {})}=={version}"
            found = [(closure[p].get(canonicalize_name(Requirement(pin).name)) or {}) for p in platforms]
            if all(f.get("version") == version for f in found):
                out[pin] = sorted({sha for f in found for sha in f["files"].values()})
        return out
    if not section:
        return {}
    python = load_base(v["base"]).python_version
    for pin, places in section.items():
        recs = [places.get(f"py{python} {p}") or {} for p in platforms]
        if all("sha256" in r for r in recs):
            out[pin] = sorted({r["sha256"] for r in recs})
    return out


def upstream_tags_of(raw: dict, name: str) -> dict:
    scheme = raw.get("upstream_tags") or {}
    if not scheme:
        return {}
    return {
        "image": scheme["image"],
        "dev_prefix": scheme.get("dev_prefix", "dev"),
        "postfix": (scheme.get("postfix") or {}).get(name, ""),
    }


def _origin_finder(file: str, name: str, raw: dict, over: dict, layers: list):
    """origin(table, entry) -> (file, key) of the last place that declared a table entry (the variant, the family,
    then its layers, last first): where an error about that entry points."""

    def origin(table: str, entry) -> tuple[str, str]:
        if isinstance(entry, int):  # a patch: the list is replaced whole, never merged
            where = f"variants.{name}.patches" if "patches" in over else "patches"
            return file, f"{where}[{entry}]"
        if entry in (over.get(table) or {}):
            return file, f"variants.{name}.{table}.{entry}"
        if entry in (raw.get(table) or {}):
            return file, f"{table}.{entry}"
        for label, layer in reversed(layers):
            if entry in (layer.get(table) or {}):
                return label, f"{table}.{entry}"
        return file, f"{table}.{entry}"

    return origin


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
    variants: dict[str, Variant] = {}
    aliases: dict[str, str] = {}
    families: dict[str, list] = {}
    claimed: dict[str, tuple] = {}  # alias -> (file, key) that made it: a target name means one thing
    for path in sorted(images_dir.glob("*.yaml")):
        raw, fam = _parse_family(path)
        file = path_label(path)
        families[raw["family"]] = sorted(fam)
        for name, v in fam.items():
            if name in variants:
                raise SpecError(file, f"variants.{name}", f"also defined in {variants[name].spec_file}")
            variants[name] = v
        for key in ("family", "alias"):
            alias = raw.get(key)
            if alias is None or alias in fam:
                continue
            if alias in claimed and claimed[alias][0] != file:
                raise SpecError(file, key, f"{short(alias)} is also an alias in {claimed[alias][0]}")
            aliases[alias], claimed[alias] = raw["default"], (file, key)
    for alias, (file, key) in claimed.items():
        if alias in variants:
            raise SpecError(file, key, f"{short(alias)} is also a variant in {variants[alias].spec_file}")
    if not variants:
        raise UsageError(f"no image specs found in {images_dir}")
    return Catalog(variants=variants, aliases=aliases, families=families)
