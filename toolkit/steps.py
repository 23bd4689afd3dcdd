"""Step kinds: what an image spec's `steps` list may declare, one class per kind.

A family's `steps` say, in order, everything its image does between the base and the bridge: system packages, pip
pins, source installs of git components, patches. Each entry is a mapping with exactly one kind key (its value is
the kind's main argument) plus that kind's options, or a bare kind name for a kind without arguments; every step may
carry `why:` (rendered as a comment above it) and `when: {ARG: VALUE}` (rendered only for the variants whose build
args have those values; what it names still counts as used, since the spec says when). The class below is the kind's
contract: what it reads from the spec, what it leaves in the image, what it may not do. Its Dockerfile text is the
macro of the same name in templates/partials/steps.j2, and nothing else writes that text. docs/step-kinds.md is
generated from these docstrings (`python3 -m toolkit.steps`; a test keeps it current).

Values may name a build arg of the variant as `${NAME}` (a compiler's target list, a CUDA major in a package name):
the reference reaches the Dockerfile as a quoted `"${NAME}"` expansion and every other character as literal data. A
reference to an arg the variant does not declare is refused."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from toolkit import artifacts as art
from toolkit.errors import SpecError, short
from toolkit.schema import STR_LIST, STR_MAP, check
from toolkit.spec_values import (
    CONTROL_RE,
    DEBIAN_NAME_RE,
    EXTRAS_RE,
    IDENT_RE,
    PLATFORM_MACHINES,
    check_abs_path,
    check_rel_path,
    pip_name_problem,
)

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


def _pin(name: str, v: dict, where: Where, sub: str) -> None:
    if name not in (v.get("pip") or {}):
        raise where.error(sub, f"{short(name)} is not in the variant's `pip` table (pins live there, steps name them)")


def _component(name: str, v: dict, where: Where, sub: str) -> dict:
    comp = (v.get("components") or {}).get(name)
    if comp is None:
        raise where.error(sub, f"{short(name)} is not a component of the variant")
    return comp


def _artifact(name, v: dict, where: Where, sub: str, wheel: bool = False) -> dict:
    """The record of a family artifact that names one file (locked or pending); a wheel when `wheel`."""
    record = (v.get("artifacts") or {}).get(name) if isinstance(name, str) else None
    if record is None:
        raise where.error(sub, f"{short(name)} is not an artifact of the family (declare it under `artifacts`)")
    if "url" not in record:
        raise where.error(sub, f"artifact {short(name)} is a whole release; a step reads one file (declare it by url)")
    if wheel and art.wheel_dist(art.file_name(record)) is None:
        raise where.error(sub, f"artifact {short(name)} is not a wheel: {short(art.file_name(record))}")
    return record


def _prebuilt(step: dict, v: dict, where: Where) -> None:
    if "prebuilt" in step:
        _artifact(step["prebuilt"], v, where, "prebuilt", wheel=True)


def _with_prebuilt(step: dict, v: dict, target: str) -> dict:
    """A step's view with its prebuilt choice (toolkit/artifacts.py) and the artifact it then reads."""
    choice = art.prebuilt_choice(step, v.get("artifacts") or {}, v.get("wheels") or ())
    if choice is None:
        return step
    reads = [choice["name"]] if choice["how"] == "artifact" else []
    return dict(step, choice=choice, target=target, reads_artifacts=reads)


def _flags_env(step: dict, v: dict, where: Where) -> None:
    for i, flag in enumerate(step.get("flags", [])):
        if flag not in PIP_FLAGS:
            raise where.error(f"flags[{i}]", f"unknown pip flag {short(flag)}; known: {', '.join(PIP_FLAGS)}")
    for name, value in step.get("env", {}).items():
        if not IDENT_RE.fullmatch(name):
            raise where.error(f"env.{short(name, 40, quote=False)}", "names are identifiers")
        check_refs(value, v.get("args") or {}, where, f"env.{name}")


class BuildEnv(Kind):
    """`build_env: {NAME: VALUE, ...}` — ENV for the steps that follow (compilers' target lists and the like).

    Reads: the mapping (rendered sorted by name); values may reference build args as `${NAME}`.
    Leaves: the variables in the image's configuration (ENV persists into the image).
    May not: hold a runtime setting the gates must judge; those go in the family's `env`, set right before the gates.
    """

    key = "build_env"
    main = STR_MAP

    def check(self, step, v, where):
        for name, value in step["value"].items():
            if not IDENT_RE.fullmatch(name):
                raise where.error(short(name, 40, quote=False), "names are identifiers")
            check_refs(value, v.get("args") or {}, where, name)


class Apt(Kind):
    """`apt: [PACKAGE, ...]` — Debian/Ubuntu packages from the base image's archive, without recommends.

    Reads: package names (Debian's grammar; `${NAME}` references allowed).
    Leaves: the packages; the apt lists are removed in the same layer.
    May not: pin versions (the vendor archives drop old versions; the base image's tag pins the distribution).
    """

    key = "apt"
    main = STR_LIST

    def check(self, step, v, where):
        for i, name in enumerate(step["value"]):
            check_refs(name, v.get("args") or {}, where, f"apt[{i}]")
            if not DEBIAN_NAME_RE.fullmatch(expand(name, v.get("args") or {})):
                raise where.error(f"apt[{i}]", f"not a Debian package name: {short(name)}")


class Pip(Kind):
    """`pip: [NAME, ...]` — the named pins of the variant's `pip` table, installed together as NAME==VERSION.

    Reads: names in the `pip` table (the versions live there, once); options `flags` (no-deps, no-build-isolation,
    force-reinstall), `env` (variables for this pip run only; `${NAME}` references allowed) and `replaces_apt`
    (apt packages the wheels replace, purged first in the same step, so the loader never mixes the two);
    `prebuilt` (a wheel artifact installed instead of building the one pin from source: toolkit/artifacts.py);
    `extra_index` (https URLs of vendor wheel indexes searched besides the default one, `${NAME}` references
    allowed: flashinfer publishes its cubin and JIT-cache wheels only there; the index check and the lock read them).
    A `no-deps` step installs exactly the files the family's lock records (`--require-hashes`), or says in a comment
    which pin is still pending there.
    Leaves: the distributions. On a wheelhouse family pip runs offline against the wheelhouse and its constraints
    (with wheels for several platforms, the step names the packages and each platform's constraints pin them);
    elsewhere it reaches the index with the host's CA bundle mounted as a secret (never in a layer).
    May not: install anything unpinned or name a pin the table does not hold.
    """

    key = "pip"
    main = STR_LIST
    options = {"flags": STR_LIST, "env": STR_MAP, "replaces_apt": STR_LIST, "prebuilt": str, "extra_index": STR_LIST}

    def check(self, step, v, where):
        args = v.get("args") or {}
        for i, name in enumerate(step["value"]):
            _pin(name, v, where, f"pip[{i}]")
        for i, url in enumerate(step.get("extra_index", [])):
            check_refs(url, args, where, f"extra_index[{i}]")
            if not INDEX_URL_RE.fullmatch(expand(url, args)):
                raise where.error(f"extra_index[{i}]", f"an https index URL is required, got {short(url)}")
        _flags_env(step, v, where)
        _prebuilt(step, v, where)
        if "prebuilt" in step:
            if len(step["value"]) != 1:
                raise where.error("prebuilt", "a prebuilt wheel replaces one pin: name exactly one")
            name = step["value"][0]
            wheel = art.file_name(v["artifacts"][step["prebuilt"]])
            if not art.is_wheel_of(wheel, expand(name, args), v["pip"][name]):
                raise where.error("prebuilt", f"{short(wheel)} is not the wheel of {name}=={v['pip'][name]}")
        for i, name in enumerate(step.get("replaces_apt", [])):
            check_refs(name, args, where, f"replaces_apt[{i}]")
            if not DEBIAN_NAME_RE.fullmatch(expand(name, args)):
                raise where.error(f"replaces_apt[{i}]", f"not a Debian package name: {short(name)}")

    def uses(self, step, v):
        return {("pip", name) for name in step["value"]}

    def view(self, step, v):
        # A wheelhouse with wheels for several platforms: one Dockerfile serves them all, so the step names the
        # packages and each platform's constraints file (its wheelhouse's constraints.txt) holds the exact pins.
        by_name = bool((v.get("wheelhouse") or {}).get("other_platforms"))
        pins = [(name, None if by_name else v["pip"][name]) for name in step["value"]]
        view = dict(step, pins=pins)
        if "no-deps" in step.get("flags", []) and not v.get("wheelhouse"):
            # Exactly the locked files: pip checks each against the lock's sha256s (any of the variant's platforms).
            locked = v.get("pip_files") or {}
            keys = [f"{expand(name, v.get('args') or {})}=={version}" for name, version in pins]
            missing = [k for k in keys if k not in locked]
            if missing:
                view["unhashed"] = (
                    f"not hash-checked: no locked file for {', '.join(missing)} (`build.py lock`; a pin whose index"
                    " could not be reached stays pending)"
                )
            else:
                view["hashes"] = [(k, sorted(set(locked[k].values()))) for k in keys]
        return _with_prebuilt(view, v, step["value"][0])


class PipUninstall(Kind):
    """`pip_uninstall: [NAME, ...]` — removes distributions the base image carries, before a step replaces them.

    Reads: distribution names. Leaves: nothing of them. May not: fail when one is absent (pip only warns).
    """

    key = "pip_uninstall"
    main = STR_LIST

    def check(self, step, v, where):
        for i, name in enumerate(step["value"]):
            problem = pip_name_problem(name)
            if problem:
                raise where.error(f"pip_uninstall[{i}]", problem)


class PipPyFiles(Kind):
    """`pip_py_files: PIN` with `package: IMPORT_NAME` — a wheel's top-level .py files added to an installed package.

    For a base image whose native build of a package lacks its pure-Python modules: the pin's wheel is unpacked
    into a scratch folder (no dependencies) and its `IMPORT_NAME/*.py` files copied beside the installed package's,
    never over an existing file.
    Reads: a pin of the `pip` table, the import name. Leaves: the added .py files only (the scratch folder is removed).
    May not: replace a file of the installed package.
    """

    key = "pip_py_files"
    main = str
    options = {"package": str}

    def check(self, step, v, where):
        _pin(step["value"], v, where, "pip_py_files")
        if not IDENT_RE.fullmatch(step.get("package", "")):
            raise where.error("package", f"an import name is required, got {short(step.get('package'))}")

    def uses(self, step, v):
        return {("pip", step["value"])}

    def view(self, step, v):
        return dict(step, pin=(step["value"], v["pip"][step["value"]]))


class Source(Kind):
    """`source: COMPONENT` — pip installs a git component's tree (the pinned commit, or `--source NAME=PATH`).

    Reads: the component (its `subdir`, or the step's, is the package's folder in the tree); options `flags` and
    `env` as `pip`; `extras` (the package's extras, comma-separated); `into` (a path: the tree is copied there with
    its `.git`, a checkout at the pinned commit, and stays in the image; the component's own patches are applied
    right after the copy); `replace` (remove what the base image has at `into` first); `editable` (install `into`
    in editable mode; needs `into`); `version` (the PEP 440 version to build the tree as, for a tree whose version
    would come from git tags it does not carry);
    `install: false` (with `into`: copy the tree in, install nothing); `prebuilt` (without `into`: a wheel artifact
    installed instead of the build, toolkit/artifacts.py);
    `pyproject` (another manifest of the package's folder that becomes its `pyproject.toml` before the install, e.g.
    sglang's `pyproject_other.toml` for ROCm) and `pyproject_replace` (`{OLD: NEW}` literal rewrites of that
    manifest's requirement text, each of which must match: image_tools/pyproject.py), so the installed metadata is
    the platform's own.
    Leaves: the installed package; with `into`, the tree at that path. Without `into` the tree is bind-mounted for
    this step only and nothing of it but the install remains.
    May not: fetch the source itself (BuildKit fetches the named context `src-COMPONENT`).
    """

    key = "source"
    main = str
    options = {
        "flags": STR_LIST,
        "env": STR_MAP,
        "subdir": str,
        "extras": str,
        "into": str,
        "replace": bool,
        "editable": bool,
        "version": str,
        "install": bool,
        "prebuilt": str,
        "pyproject": str,
        "pyproject_replace": STR_MAP,
    }

    def check(self, step, v, where):
        _component(step["value"], v, where, "source")
        _flags_env(step, v, where)
        _prebuilt(step, v, where)
        if "prebuilt" in step and "into" in step:
            raise where.error("prebuilt", "a tree that stays in the image (`into`) has no prebuilt wheel")
        if "into" in step:
            check_abs_path(step["into"], where.file, f"{where.key}.into")
        if step.get("install") is False and "into" not in step:
            raise where.error("install", "`install: false` needs `into` (the tree is then only copied in)")
        for option in ("editable", "replace"):
            if step.get(option) and "into" not in step:
                raise where.error(option, f"`{option}` needs `into` (the tree must stay in the image)")
        if "subdir" in step:
            check_rel_path(step["subdir"], where.file, f"{where.key}.subdir")
        if "extras" in step and not EXTRAS_RE.fullmatch(step["extras"]):
            raise where.error("extras", f"extras are comma-separated names, got {short(step['extras'])}")
        if ("pyproject" in step or "pyproject_replace" in step) and "into" not in step:
            raise where.error("pyproject", "a manifest is rewritten in a tree that stays in the image: needs `into`")
        if "pyproject" in step and not MANIFEST_RE.fullmatch(step["pyproject"]):
            raise where.error("pyproject", f"a .toml file name in the package's folder, got {short(step['pyproject'])}")
        for old, new in step.get("pyproject_replace", {}).items():
            for text in (old, new):
                if not REQ_TEXT_RE.fullmatch(text):
                    key = f"pyproject_replace.{short(old, 40, quote=False)}"
                    raise where.error(key, f"not requirement text: {short(text)}")
        if "version" in step and not re.fullmatch(r"[0-9]+(\.[0-9]+)*([a-z0-9.+]*)", step["version"]):
            raise where.error("version", f"a PEP 440 version is required, got {short(step['version'])}")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        name = step["value"]
        patches = [p for p in v.get("patches") or () if p.get("component") == name]
        view = dict(step, name=name, subdir=step.get("subdir", comp.get("subdir", "")), patches=patches)
        return _with_prebuilt(view, v, name)


class Make(Kind):
    """`make: COMPONENT` with `vars`, `binaries`, `to` — builds a component's tree with make, keeps some binaries.

    Reads: the component (built in its `subdir`), `vars` (make variables; `${NAME}` references allowed),
    `binaries` (a path pattern under that folder, `*` allowed) and `to` (where the binaries go).
    Leaves: the matching binaries in `to`; the tree and the build folder are a bind mount, gone after the step.
    May not: install anything else.
    """

    key = "make"
    main = str
    options = {"vars": STR_MAP, "binaries": str, "to": str}

    def check(self, step, v, where):
        _component(step["value"], v, where, "make")
        for name, value in step.get("vars", {}).items():
            if not IDENT_RE.fullmatch(name):
                raise where.error(f"vars.{short(name, 40, quote=False)}", "make variable names are identifiers")
            check_refs(value, v.get("args") or {}, where, f"vars.{name}")
        binaries = step.get("binaries", "")
        if not GLOB_RE.fullmatch(binaries) or binaries.startswith("/") or ".." in binaries.split("/"):
            raise where.error("binaries", f"a relative path pattern is required, got {short(binaries)}")
        check_abs_path(step.get("to", ""), where.file, f"{where.key}.to")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        return dict(step, name=step["value"], subdir=comp.get("subdir", ""))


class Requirements(Kind):
    """`requirements: COMPONENT` — pip installs the requirements file of a component's tree, less `exclude`.

    Reads: the component's `requirements` (a file in its tree) and `exclude` (names dropped by
    image_tools/requirements.py, which fails when a name is no longer in the file); options `flags` as `pip`, and
    `drop_system`
    (entries of /usr/lib/python3/dist-packages, a trailing `*` allowed, that the OS installed without a pip record,
    so pip could not replace them: they are removed first).
    Leaves: the requirements' distributions. Only the requirements file is mounted, so a change elsewhere in the
    tree keeps this layer.
    May not: install the component itself (a `source` step does).
    """

    key = "requirements"
    main = str
    options = {"flags": STR_LIST, "drop_system": STR_LIST}

    def check(self, step, v, where):
        _flags_env(step, v, where)
        comp = _component(step["value"], v, where, "requirements")
        if "requirements" not in comp:
            raise where.error("requirements", f"component {short(step['value'])} names no `requirements` file")
        for i, name in enumerate(step.get("drop_system", [])):
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*\*?", name):
                raise where.error(f"drop_system[{i}]", f"a folder name (a trailing `*` allowed): {short(name)}")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        return dict(step, name=step["value"], file=comp["requirements"], exclude=comp.get("exclude") or [])


class Patches(Kind):
    """`patches` — applies, here, the variant's `patches` that belong to no component (trees that exist by now).

    Reads: the `patches` list (a component's own patches are applied by its `source` step, right after its copy).
    Leaves: the patched trees. Each patch is checked first, applied with full context and proved by a reverse
    check; any mismatch fails the build.
    May not: use zero-context hunks or `--3way` (the overlay guard refuses such patch files).
    """

    key = "patches"

    def view(self, step, v):
        return dict(step, patches=[p for p in v.get("patches") or () if "component" not in p])


class Artifact(Kind):
    """`artifact: NAME` with `to: PATH`, or `over: LINK` and `expect: FILE` — installs a checksum-pinned file.

    Reads: a family artifact (one file by URL, its sha256 from the lock); `to` (the absolute path the file is
    installed at, mode 0644, or 0755 with `executable: true`), or `over` (an absolute path whose link target the
    file replaces, a shared library say) with `expect` (the file name that target must have, so the file replaces
    the build it was made for; the original is kept beside it as `<target>.orig`).
    Leaves: the file. BuildKit fetches it in a stage of its own and checks its digest; the step bind-mounts it.
    May not: run the file, or install anything while the artifact is pending in the lock (the step is then left out
    and the image's `io.miles.source.NAME` label says so).
    """

    key = "artifact"
    main = str
    options = {"to": str, "over": str, "expect": str, "executable": bool}

    def check(self, step, v, where):
        _artifact(step["value"], v, where, "artifact")
        if ("to" in step) == ("over" in step):
            raise where.error("", "exactly one of `to` (a file path) and `over` (a link whose target it replaces)")
        path = step.get("to", step.get("over", ""))
        check_abs_path(path, where.file, f"{where.key}.{'to' if 'to' in step else 'over'}")
        if "over" in step and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", step.get("expect", "")):
            raise where.error("expect", f"`over` needs `expect`, the target's file name: {short(step.get('expect'))}")
        if "over" not in step and "expect" in step:
            raise where.error("expect", "`expect` goes with `over`")

    def uses(self, step, v):
        return {("artifacts", step["value"])}

    def view(self, step, v):
        record = v["artifacts"][step["value"]]
        if art.is_pending(record):
            return dict(step, pending=True)
        return dict(step, file=art.file_name(record), reads_artifacts=[step["value"]])


class Cargo(Kind):
    """`cargo: COMPONENT` with `toolchain: {ARCH: ARTIFACT}` — builds a Rust component with a pinned toolchain.

    Reads: the component; `toolchain` (per `uname -m`, x86_64 and/or aarch64: a family artifact that is Rust's
    standalone release tarball, `rust-<version>-<triple>.tar.gz`, locked by digest); `bins` (binaries built with
    `cargo build --release` and installed in `to`); `features` (cargo features, also passed to maturin);
    `python` (a folder of the tree with a maturin `pyproject.toml`: its wheel is built and pip installed over any
    copy of the same version, with maturin from the variant's pins, no build isolation, no deps).
    Leaves: the binaries and the Python package. The toolchain is unpacked, used and removed in the same step, so
    neither it nor the crate cache reaches a layer.
    May not: fetch a toolchain by script (rustup's `curl | sh`): only the locked tarball runs.
    """

    key = "cargo"
    main = str
    options = {"toolchain": STR_MAP, "bins": STR_LIST, "features": STR_LIST, "to": str, "python": str}
    ARCHES = ("x86_64", "aarch64")

    def check(self, step, v, where):
        _component(step["value"], v, where, "cargo")
        toolchain = step.get("toolchain") or {}
        if not toolchain:
            raise where.error("toolchain", "name the Rust toolchain artifact per machine (x86_64, aarch64)")
        for arch, name in toolchain.items():
            if arch not in self.ARCHES:
                raise where.error(f"toolchain.{short(arch, 40, quote=False)}", f"one of {', '.join(self.ARCHES)}")
            record = _artifact(name, v, where, f"toolchain.{arch}")
            if art.is_pending(record):
                raise where.error(f"toolchain.{arch}", f"artifact {name} is pending in the lock; lock it first")
            if not re.fullmatch(rf"rust-[0-9][0-9.]*-{arch}-unknown-linux-gnu\.tar\.gz", art.file_name(record)):
                raise where.error(f"toolchain.{arch}", f"not Rust's {arch} release: {short(art.file_name(record))}")
        for platform in v.get("platforms") or ():
            if self.MACHINES.get(platform) not in toolchain:
                raise where.error("toolchain", f"no toolchain for the variant's platform {platform}")
        for opt in ("bins", "features"):
            for i, word in enumerate(step.get(opt, [])):
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", word):
                    raise where.error(f"{opt}[{i}]", f"a cargo name is letters, digits, '_', '-': {short(word)}")
        if step.get("bins"):
            check_abs_path(step.get("to", ""), where.file, f"{where.key}.to")
        if "python" in step:
            check_rel_path(step["python"], where.file, f"{where.key}.python")
            if "maturin" not in (v.get("pip") or {}):
                raise where.error("python", "a maturin build needs a `maturin` pin in the variant's `pip` table")
        if not step.get("bins") and "python" not in step:
            raise where.error("", "nothing to build: give `bins` and/or `python`")

    def uses(self, step, v):
        return {("components", step["value"])} | {("artifacts", n) for n in (step.get("toolchain") or {}).values()}

    MACHINES = PLATFORM_MACHINES

    def view(self, step, v):
        # Only the toolchains of the variant's platforms are fetched (a tarball is hundreds of MB).
        machines = {self.MACHINES.get(p) for p in v.get("platforms") or ()}
        tools = [
            (arch, name, art.file_name(v["artifacts"][name]))
            for arch, name in sorted(step["toolchain"].items())
            if arch in machines
        ]
        return dict(step, name=step["value"], tools=tools, reads_artifacts=[n for _, n, _ in tools])


class Workdir(Kind):
    """`workdir: PATH` — the working directory of the steps after it and of the image.

    Reads: an absolute path. Leaves: the image's working directory. May not: be relative.
    """

    key = "workdir"
    main = str

    def check(self, step, v, where):
        check_abs_path(step["value"], where.file, f"{where.key}.workdir")


KINDS: dict[str, Kind] = {
    k.key: k()
    for k in (
        BuildEnv,
        Apt,
        Pip,
        PipUninstall,
        PipPyFiles,
        Source,
        Make,
        Cargo,
        Requirements,
        Patches,
        Artifact,
        Workdir,
    )
}


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
    if kind.main is None:
        raise where.error(keys[0], "this kind takes no value: write it as a bare name")
    schema = {kind.key: kind.main, "why": str, "when": STR_MAP, **kind.options}
    check(raw, schema, where.file, where.key)
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
        "Generated from `toolkit/steps.py` by `python3 -m toolkit.steps > docs/step-kinds.md`; do not edit.",
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


if __name__ == "__main__":
    sys.stdout.write(reference())
