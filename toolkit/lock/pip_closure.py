"""The whole Python environment of a GPU variant, resolved as one set: the `closure` section of a family's lock.

Each pin a step names exists on its index (toolkit/lock/pip_index.py), but pins that each exist can still conflict,
and a step that lets pip resolve on its own installs whatever the index holds that day. So `build.py lock` resolves,
per variant and platform, everything the image's Python holds as one set, with a real resolver (`uv pip compile`
for the base's Python and the platform at the base's glibc; nothing here resolves by itself):

- the base's recorded distributions, held at the base's versions (images/bases/), unless a step replaces one;
- every exact pin the variant's steps install;
- the requirements of the trees the image installs: a `requirements` step's file (less its `exclude`), the
  dependencies a `source` step's pyproject.toml declares, and the bridge's.

What no index holds as the base has it is left to the base (`left_to_base`, the record's `base_left`): on a base
whose torch no record versions (ROCm's own build), torch and every other distribution the base holds at an
unrecorded version; and sglang's tree where a step installs it from another manifest than the index's wheel's.

An allow rule of the gate step's `pip check` (`gates.pip_check.allow`: a distribution and the requirement it
excuses) is the one way to set a version against a requirement: a rule whose requirement a step pins becomes an
override to that pin, keeping the extras the excused requirement asked for; a rule whose requirement no step pins
drops it. uv's overrides are global (one meant for sglang's pin of a package also silences every other package's
requirement on it), so the closure is then checked pair by pair from its files' metadata alone (`check_pairs`): every
requirement of every distribution in it, with the target's markers and the extras the set asks for, is met or is
excused by a rule for exactly that pair. Anything else is an error at lock time, naming the requirement.

The result, per variant and `py<X.Y> <platform>`: each distribution's version and the sha256 of each file the
index offers for it there (pip accepts any one of them), and the pins left out because their index could not be
reached here (`pending`). `lock` (keep or resolve each variant's records) and `check` (resolve them again
now and compare what they install) are the two entries a family's lock calls, once each.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
import urllib.error
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from toolkit.errors import SpecError, ToolkitError, UsageError, short
from toolkit.lock import file as lock_file
from toolkit.lock import pip_index
from toolkit.lock.remote import RemoteUnavailable
from toolkit.plan import source_archive
from toolkit.spec import bases
from toolkit.spec.values import PLATFORM_MACHINES
from toolkit.steps import applies, expand
from verify.kinds.pip_check import AllowRule, PipLine

TEMP_PREFIX = "miles-closure-"  # the folders a lock unpacks and resolves in (gone when it ends; `build.py clean`)

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = ROOT / "bridge" / "pyproject.toml"
UV_TIMEOUT = 600  # a cold resolve of ~300 distributions answers in 15-25 s here; the index may be slower
MAX_FILE = 4 * 2**20  # a requirements file or pyproject.toml read from a tree
NEVER = "sys_platform == 'never'"  # uv's idiom for a requirement that is dropped
SPEC, BASE, OVERRIDE = "(spec)", "(base)", "(override)"  # who asks for a distribution, besides other distributions


@dataclass
class Inputs:
    """What one variant's closure is resolved from, as requirement lines (also what its digest covers)."""

    requirements: list = field(default_factory=list)  # what the image's steps and trees ask for
    base: list = field(default_factory=list)  # what the base holds (its own requirements must hold too)
    overrides: list = field(default_factory=list)
    pending: dict = field(default_factory=dict)  # pin -> why it is left out
    unread: list = field(default_factory=list)  # trees whose dependencies no file declares statically
    unknown: list = field(default_factory=list)  # the base's distributions at a version no record says
    rewrites: dict = field(default_factory=dict)  # distribution -> {requirement text: what a step writes instead}
    own_builds: dict = field(default_factory=dict)  # base distribution -> why its requirements are the base's own
    left: dict = field(default_factory=dict)  # base distribution -> why the resolve leaves it (and its tree) out

    def digest(self) -> str:
        parts = [self.requirements, self.base, self.overrides, sorted(self.pending), self.rewrites, self.own_builds]
        text = json.dumps(parts + ([self.left] if self.left else []), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def allow_rules(variant) -> list[AllowRule]:
    """The variant's `pip check` allow rules, as the gate runner reads them."""
    raw = (variant.gates.get("pip_check") or {}) if isinstance(variant.gates, dict) else {}
    allow = raw.get("allow") or [] if isinstance(raw, dict) else []
    return [
        AllowRule(
            r["distribution"], tuple([r["requirement"]] if "requirement" in r else r["requirements"]), r["reason"]
        )
        for r in allow
    ]


def _pyproject_deps(text: str, label: str) -> list[str] | None:
    """A pyproject.toml's static `[project] dependencies`, or None when they are dynamic or absent."""
    try:
        project = tomllib.loads(text).get("project") or {}
    except tomllib.TOMLDecodeError as e:
        raise SpecError(label, "project", f"not TOML: {e}") from None
    if "dependencies" in (project.get("dynamic") or []) or "dependencies" not in project:
        return None
    return list(project["dependencies"])


def requirement_lines(text: str, exclude=()) -> list[str]:
    """The requirements of a requirements file: comments, blank lines and `exclude`d names dropped; options refused."""
    out, dropped = [], {canonicalize_name(n) for n in exclude}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("-"):
            raise ValueError(f"an option line is not a requirement: {short(line)}")
        req = Requirement(line)
        if canonicalize_name(req.name) not in dropped:
            out.append(str(req))
    return out


def lock_sources(items) -> list[tuple[str, str]]:
    """`lock --source NAME=PATH` items: a folder or a file that exists (UsageError otherwise)."""
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path or not Path(path).exists():
            raise UsageError(f"--source {short(item)}: expected NAME=PATH of an existing tree or source tarball")
        out.append((name, path))
    return out


class Trees:
    """Files of a variant's git components at their pins: from `--source NAME=PATH` (a folder or a source
    tarball), else fetched with git (one shallow fetch of the commit; hosts that cannot reach the remote pass
    --source)."""

    def __init__(self, sources: dict | None = None):
        self.sources = {k: Path(v) for k, v in (sources or {}).items()}
        self._cache: dict = {}
        self._unpacked: dict = {}  # name -> the folder of an unpacked tarball (removed with this object, or at exit)

    def read(self, name: str, component: dict, rel: str) -> str | None:
        key = (name, component.get("ref"), rel)
        if key not in self._cache:
            self._cache[key] = self._read(name, component, rel)
        return self._cache[key]

    def _read(self, name: str, component: dict, rel: str) -> str | None:
        sub = component.get("subdir") or ""
        path = str(PurePosixPath(sub, rel)) if sub else rel
        if name not in self.sources:
            return _from_git(component["git"], component["ref"], path)
        f = self._tree(name) / path
        return f.read_text(encoding="utf-8") if f.is_file() and f.stat().st_size <= MAX_FILE else None

    def _tree(self, name: str) -> Path:
        """A `--source` folder as it is; a tarball unpacked once, by the same checked unpacking a build uses."""
        src = self.sources[name]
        if src.is_dir():
            return src
        if name not in self._unpacked:
            folder = tempfile.mkdtemp(prefix=TEMP_PREFIX)
            # Removed when this object goes (a finalizer, not TemporaryDirectory's, which warns when it is the GC
            # that removes it), or when the interpreter exits.
            weakref.finalize(self, shutil.rmtree, folder, True)
            self._unpacked[name] = Path(folder)
            source_archive.unpack(src, self._unpacked[name] / "tree", f"--source {name}")
        return self._unpacked[name] / "tree"


def _from_git(url: str, commit: str, path: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as tmp:
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
        run = [["git", "init", "-q", "--bare", tmp], ["git", "-C", tmp, "fetch", "-q", "--depth=1", url, commit]]
        for argv in run:
            p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
            if p.returncode != 0:
                why = (p.stderr.strip().splitlines() or ["no output"])[-1]
                raise RemoteUnavailable(
                    f"{url}@{commit[:12]}: cannot fetch it to read {path} ({short(why)}); give --source"
                )
        shown = subprocess.run(["git", "-C", tmp, "show", f"{commit}:{path}"], capture_output=True, env=env)
        return shown.stdout.decode("utf-8") if shown.returncode == 0 else None


def inputs(variant, lock_pip: dict, trees: Trees, index: pip_index.Index) -> Inputs:
    """What the variant's closure is resolved from (see the module docstring)."""
    base = bases.load_base(variant.base)
    args = variant.args
    got = Inputs()
    pinned: dict = {}  # canonical name -> (requirement text, version)
    for use in pip_index.pin_uses(variant):
        key = f"{use.name}=={use.version}"
        recs = (lock_pip.get(key) or {}).values()
        if use.indexes and any("pending" in r for r in recs):
            got.pending[key] = "on an index this host could not reach (the step installs it by name and version)"
            continue
        pinned[use.project] = (key, use.version)
    for _, (text, _v) in sorted(pinned.items()):
        got.requirements.append(text)
    got.unknown = sorted(n for n in base.unrecorded if canonicalize_name(n) not in pinned)
    got.own_builds = _own_builds(base, index)
    got.left = left_to_base(base, got.unknown)
    for name, version in sorted(base.distributions.items()):
        if canonicalize_name(name) not in pinned and version:
            got.base.append(f"{name}=={version}")
    for step in variant.steps:
        if not applies(step, args):
            continue
        comp = variant.components.get(step.get("value")) if step["kind"] in ("requirements", "source") else None
        if comp is None:
            continue
        name = step["value"]
        if step.get("into") and step.get("into") == base.sglang_tree and "version" in step and "pyproject" in step:
            # sglang's checkout over the base's, installed --no-deps from another manifest than the one the index's
            # wheel is built from (ROCm's pyproject_other.toml): no file of the index is that build, and its
            # requirements are those the base installed for its own sglang from that manifest. Left to the base.
            got.base = [line for line in got.base if canonicalize_name(Requirement(line).name) != "sglang"]
            got.left["sglang"] = (
                f"the step's tree, built from its {step['pyproject']} (not the manifest of the index's wheel) and"
                " installed --no-deps over the base's checkout: its requirements are those the base installed"
            )
        elif step.get("into") and step.get("into") == base.sglang_tree and "version" in step:
            # sglang's checkout over the base's: its requirements are those of the release it is built as.
            # A manifest the step rewrites (CUDA 12's requirements over CUDA 13's) is the metadata the image holds.
            extras = f"[{step['extras']}]" if step.get("extras") else ""
            got.requirements.append(f"sglang{extras}=={step['version']}")
            replace = step.get("pyproject_replace", {})
            got.rewrites["sglang"] = {expand(o, args): expand(n, args) for o, n in replace.items()}
        if step["kind"] == "requirements":
            text = trees.read(name, comp, comp["requirements"])
            if text is None:
                raise UsageError(f"closure of {variant.name}: {name} has no {comp['requirements']} at its pin")
            try:
                got.requirements += requirement_lines(text, comp.get("exclude") or [])
            except (ValueError, InvalidRequirement) as e:
                raise UsageError(f"closure of {variant.name}: {name}'s {comp['requirements']}: {e}") from None
        elif "no-deps" not in step.get("flags", []) and not step.get("prebuilt"):
            try:
                text = trees.read(name, comp, "pyproject.toml")
            except RemoteUnavailable:
                text = None  # a host that cannot reach the remote records the tree as unread
            deps = _pyproject_deps(text, f"{name}:pyproject.toml") if text is not None else None
            if deps is None:
                got.unread.append(name)
            else:
                got.requirements += deps
    bridge = _pyproject_deps(BRIDGE.read_text(encoding="utf-8"), "bridge/pyproject.toml") or []
    got.requirements += bridge
    got.overrides = _overrides(variant, pinned, got.requirements + got.base, index, got.rewrites, got.left)
    return got


def _overrides(variant, pinned: dict, requirements: list, index: pip_index.Index, rewrites: dict, left=()) -> list[str]:
    """An allow rule's requirement pinned by a step: overridden to that pin, with the extras of the step's own text
    and of the requirement it excuses (read from the excusing distribution's metadata: an override without them
    would drop what the extra brings); a requirement no step pins: dropped. A requirement a step rewrites in a
    manifest: overridden to what the step writes (at the step's pin where one pins it). A distribution left to the
    base (`left_to_base`): dropped, so no requirement on it brings the index's build."""
    versions = {canonicalize_name(Requirement(r).name): _exact(r) for r in requirements}
    out = {name: f"{name}; {NEVER}" for name in left}
    for new in (n for table in rewrites.values() for n in table.values()):
        written = Requirement(new)
        name = canonicalize_name(written.name)
        extra = f"[{','.join(sorted(written.extras))}]" if written.extras else ""
        out[name] = f"{name}{extra}=={pinned[name][1]}" if name in pinned else f"{name}{extra}{written.specifier}"
    for rule in allow_rules(variant):
        owner = canonicalize_name(rule.distribution)
        if owner in left:
            continue  # its requirements are not in the resolve: nothing to override (the image's gate still reads it)
        for req in rule.requirements:
            name = canonicalize_name(req)
            if name in out:
                continue  # the step's own rewrite says it
            if name in pinned:
                text, version = pinned[name]
                extras = set(Requirement(text).extras) | _extras_asked(owner, versions.get(owner), name, index)
                extra = f"[{','.join(sorted(extras))}]" if extras else ""
                out[name] = f"{name}{extra}=={version}"
            else:
                out.setdefault(name, f"{name}; {NEVER}")
    return [out[k] for k in sorted(out)]


def _own_builds(base, index: pip_index.Index) -> dict:
    """The base's distributions that are not the index's build of the same version: a base whose torch is a CUDA
    12 build (from PyTorch's own index) holds a torch whose requirements are not those of the index's torch 2.11.0
    (a CUDA 13 build, `cuda-toolkit==13.*`). Their requirements are the base's: the resolve takes them as having
    none, and the check does not read them."""
    if not base.torch_version or not base.torch_cuda:
        return {}
    entries = [
        e
        for e in _asked(index.files, "torch") or []
        if e.get("filename", "").endswith(".whl") and f"-{base.torch_version}-" in e["filename"]
    ]
    text = _asked(_metadata_of, entries[0], index) if entries else None
    for line in (HeaderParser().parsestr(text).get_all("Requires-Dist") or []) if text else []:
        req = Requirement(line)
        spec = next(iter(req.specifier), None)
        if canonicalize_name(req.name) == "cuda-toolkit" and spec is not None:
            index_major, base_major = spec.version.split(".")[0], base.torch_cuda.split(".")[0]
            if index_major != base_major:
                return {
                    "torch": f"the base's torch {base.torch_version} is a CUDA {base.torch_cuda} build; the "
                    f"index's is CUDA {index_major} (cuda-toolkit {spec.version}): its requirements are the base's"
                }
    return {}


def left_to_base(base, unknown) -> dict:
    """The base's distributions the resolve leaves out: {name: why}. A base whose torch no record versions (a ROCm
    base: its torch is the base's own ROCm build, on no index this resolve reads) holds a torch whose requirements
    and version are unknown, and the index's torch of any version is another build (CUDA's, which brings triton and
    nvidia-* wheels). So on such a base every distribution it holds at a version no record says (`unknown`: torch,
    its triton, the kernels built against it) is dropped from the resolve (an override that is never true), and the
    check counts a requirement on one as met by the base's, whose version it cannot read. A base whose torch is
    recorded keeps resolving its unrecorded distributions from the index (and leaves them to the base: `installs`)."""
    if base.torch_version is not None:
        return {}
    why = "the base's own build, at a version no record says (the base's torch is unrecorded)"
    return {canonicalize_name(n): why for n in unknown}


def _exact(line: str) -> str | None:
    specs = list(Requirement(line).specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


def _extras_asked(owner: str, version: str | None, name: str, index: pip_index.Index) -> set:
    """The extras `owner`'s requirement on `name` asks for, from the metadata of its wheel at `version`."""
    if version is None:
        return set()
    entry = next(
        (
            e
            for e in _asked(index.files, owner) or []
            if e.get("filename", "").endswith(".whl") and f"-{version}-" in e["filename"]
        ),
        None,
    )
    text = _asked(index.metadata, entry) if entry else None
    extras: set = set()
    for line in (HeaderParser().parsestr(text).get_all("Requires-Dist") or []) if text else []:
        req = Requirement(line)
        if canonicalize_name(req.name) == name:
            extras |= set(req.extras)
    return extras


def platform_tag(platform: str, glibc: str) -> str:
    """uv's `--python-platform` for a Linux platform at the base's glibc."""
    return f"{PLATFORM_MACHINES[platform]}-manylinux_{glibc.replace('.', '_')}"


def resolve(variant, platform: str, got: Inputs, index_url: str, cafile: str | None) -> dict:
    """{canonical name: {"version", "files": {file name: sha256}}} for one platform, from uv's pylock output."""
    base = bases.load_base(variant.base)
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as tmp:
        files = {}
        for part in ("requirements", "base", "overrides"):
            files[part] = Path(tmp, f"{part}.txt")
            files[part].write_text("".join(f"{line}\n" for line in getattr(got, part)), encoding="utf-8")
        config = Path(tmp, "uv.toml")  # a base's own builds: their requirements are the base's (uv's static metadata)
        config.write_text(
            "".join(
                f'[[dependency-metadata]]\nname = "{n}"\nversion = "{_exact(line)}"\nrequires-dist = []\n'
                for line in got.base
                for n in [canonicalize_name(Requirement(line).name)]
                if n in got.own_builds
            ),
            encoding="utf-8",
        )
        out = Path(tmp, "pylock.toml")
        argv = [
            "uv", "pip", "compile", str(files["requirements"]), str(files["base"]),
            "--overrides", str(files["overrides"]), "--config-file", str(config),
            "--python-version", base.python_version,
            "--python-platform", platform_tag(platform, base.glibc or "2.17"), "--index-url", index_url,
            "--no-header", "--quiet", "--no-progress",
            "--cache-dir", str(Path(tempfile.gettempdir(), "miles-uv-cache")),
        ]  # fmt: skip
        # Twice (the second from uv's cache): the files and their digests (PEP 751), then who asks for each.
        _uv(argv + ["--format", "pylock.toml", "-o", str(out)], variant, platform, cafile, tmp)
        annotated = _uv(argv + ["--annotation-style", "line"], variant, platform, cafile, tmp)
        lock = tomllib.loads(out.read_text(encoding="utf-8"))
    via = _parents(annotated)
    closure = {}
    for pkg in lock.get("packages", []):
        wheels = pkg.get("wheels") or []
        chosen = wheels or ([pkg["sdist"]] if "sdist" in pkg else [])
        files = {_file_name(f): f["hashes"]["sha256"] for f in chosen}
        name = canonicalize_name(pkg["name"])
        closure[name] = {"version": pkg["version"], "files": dict(sorted(files.items())), "via": via.get(name, [])}
    return dict(sorted(closure.items()))


ROOTS = {"requirements.txt": SPEC, "base.txt": BASE, "overrides.txt": OVERRIDE}


def _parents(text: str) -> dict:
    """{name: sorted parents} from uv's `# via a, b, -r FILE` annotations; an input file becomes its root mark."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==\S+\s+# via (.*)$", line)
        if not m:
            continue
        parents = set()
        for word in m.group(3).split(", "):
            flag, _, file = word.strip().partition(" ")
            parents.add(
                ROOTS.get(Path(file).name, word) if flag in ("-r", "--override", "-c") else canonicalize_name(word)
            )
        out[canonicalize_name(m.group(1))] = sorted(parents)
    return out


def _uv(argv: list, variant, platform: str, cafile: str | None, cwd: str) -> str:
    env = dict(os.environ, UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
    if cafile:
        env["SSL_CERT_FILE"] = cafile
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=UV_TIMEOUT, cwd=cwd)
    except FileNotFoundError:
        raise UsageError("lock: uv is not installed (requirements-dev.txt pins it)") from None
    except subprocess.TimeoutExpired:
        raise RemoteUnavailable(f"closure of {variant.name} {platform}: uv did not answer in {UV_TIMEOUT}s") from None
    if p.returncode != 0:
        raise UsageError(f"closure of {variant.name} {platform} does not resolve: {_uv_reason(p.stderr)}")
    return p.stdout


def installs(record: dict) -> list[str]:
    """The distributions of a closure record the image installs: those the spec's steps and trees ask for, and
    what they bring, but not what the base holds (at a recorded version or an unrecorded one; a step that
    replaces one pins it, and then the base's is not held) nor what only the base's own distributions bring:
    the base installed those already, for its own build of them (a CUDA 12 base's torch comes from PyTorch's CUDA
    12 index, while the index's torch brings CUDA 13 libraries)."""
    packages = record["packages"]
    children: dict = {}
    for name, pkg in packages.items():
        for parent in pkg.get("via", []):
            children.setdefault(parent, []).append(name)
    # What the base holds, at its recorded version or at one no record says: never a step's pin (that wins).
    held = {n for n, p in packages.items() if BASE in p.get("via", [])} | set(record.get("base_unknown", []))
    seen, todo = set(), list(children.get(SPEC, []))
    while todo:
        name = todo.pop()
        if name in seen or name in held:
            continue
        seen.add(name)
        todo += children.get(name, [])
    return sorted(seen)


def _file_name(entry: dict) -> str:
    return entry.get("name") or PurePosixPath(entry["url"].split("#", 1)[0]).name


def _uv_reason(stderr: str) -> str:
    """uv's explanation, on one line: its `cause:` sentences, without the tree drawing."""
    text = " ".join(line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("hint"))
    text = re.sub(r"^(error: )?No solution found when resolving dependencies:?\s*", "", text, flags=re.I)
    return short(text.replace("cause: ", ""), 600)


def metadata(closure: dict, index: pip_index.Index) -> dict:
    """{name: METADATA text or None (an sdist, whose requirements are known only once built)} of each
    distribution's first wheel, read from the index (PEP 658 copies)."""

    def one(item):
        name, rec = item
        wanted = next((f for f in rec["files"] if f.endswith(".whl")), None)
        entry = next((e for e in _asked(index.files, name) or [] if e.get("filename") == wanted), None)
        return name, (_asked(_metadata_of, entry, index) if entry else None)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(one, sorted(closure.items())))


def _asked(call, *args):
    """`call(*args)` of the index, tried three times: a lost connection is common on a long run of requests."""
    for attempt in range(3):
        try:
            return call(*args)
        except (OSError, ValueError) as e:  # urllib's errors are OSErrors
            if attempt == 2:
                raise RemoteUnavailable(f"package index: {call.__name__}{short(args[:1])}: {short(str(e))}") from None
            time.sleep(1 + attempt)


def _metadata_of(entry: dict, index: pip_index.Index) -> str | None:
    """The index's metadata of a wheel; for a large wheel whose page does not advertise it, the PEP 658 copy asked
    for anyway (indexes that mirror PyPI serve it for every wheel)."""
    text = index.metadata(entry)
    if text is None:
        try:
            body, _ = index._get(entry["url"] + ".metadata", accept="*/*")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None  # no copy: the distribution's requirements stay unread (listed in the lock)
            raise
        text = body.decode("utf-8", "replace")
    return text


def check_pairs(
    closure: dict,
    metas: dict,
    roots: list,
    rules: list,
    python: str,
    platform: str,
    rewrites: dict | None = None,
    left: dict | None = None,
) -> tuple[list, list]:
    """(conflicts, allowed): `pip check`'s lines for the closure, read from metadata alone. The extras each
    distribution is asked for come from the resolve's inputs (`roots`) and from every requirement in the set; a
    distribution whose manifest a step rewrites is judged by the rewritten requirements. A requirement on a
    distribution left to the base (`left_to_base`) is met by the base's, whose version no record says: listed
    with the allowed lines, never a conflict."""
    env = pip_index.marker_environment(python, platform)
    left = left or {}
    parsed = {}
    for name, text in metas.items():
        reqs = []
        for line in (HeaderParser().parsestr(text).get_all("Requires-Dist") or []) if text else []:
            for old, new in ((rewrites or {}).get(name) or {}).items():
                line = line.replace(old, new)
            try:
                reqs.append(Requirement(line))
            except InvalidRequirement:
                continue
        parsed[name] = reqs
    asked: dict = {n: {""} for n in closure}
    for line in roots:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(dict(env, extra="")):
            asked.setdefault(canonicalize_name(req.name), {""}).update(req.extras)
    changed = True
    while changed:  # the extras asked of a distribution grow until nothing asks more
        changed = False
        for name, reqs in parsed.items():
            for req in reqs:
                if _active(req.marker, env, asked.get(name, {""})):
                    want = asked.setdefault(canonicalize_name(req.name), {""})
                    if not set(req.extras) <= want:
                        want.update(req.extras)
                        changed = True
    conflicts: list[str] = []
    allowed: list[str] = []
    for name, reqs in sorted(parsed.items()):
        version = closure[name]["version"]
        for req in reqs:
            if not _active(req.marker, env, asked.get(name, {""})):
                continue
            dep = canonicalize_name(req.name)
            if dep in left and dep not in closure:
                allowed.append(f"{name} {version} requires {req}: left to the base ({left[dep]})")
                continue
            if dep not in closure:
                text = f"{name} {version} requires {req.name}, which is not installed."
            elif not req.specifier.contains(Version(closure[dep]["version"]), prereleases=True):
                text = f"{name} {version} has requirement {req}, but you have {dep} {closure[dep]['version']}."
            else:
                continue
            rule = next((r for r in rules if r.matches(PipLine.parse(text))), None)
            (allowed if rule else conflicts).append(f"{text} (allowed: {rule.reason})" if rule else text)
    return conflicts, allowed


def _active(marker: Marker | None, env: dict, extras: set) -> bool:
    return marker is None or any(marker.evaluate(dict(env, extra=x)) for x in extras)


def lock_variant(variant, lock_pip: dict, trees: Trees, index: pip_index.Index, cafile: str | None) -> dict:
    """The variant's closure records, one per platform, checked (UsageError naming the first conflict)."""
    got = inputs(variant, lock_pip, trees, index)
    python = bases.load_base(variant.base).python_version
    rules = allow_rules(variant)
    out = {}
    for platform in variant.platforms:
        closure = resolve(variant, platform, got, index.url, cafile)
        metas = {n: (None if n in got.own_builds else m) for n, m in metadata(closure, index).items()}
        roots = got.requirements + got.base
        conflicts, allowed = check_pairs(closure, metas, roots, rules, python, platform, got.rewrites, got.left)
        if conflicts:
            more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
            raise UsageError(f"closure of {variant.name} {platform}: {conflicts[0]}{more}")
        out[f"py{python} {platform}"] = {
            "inputs": got.digest(),
            "packages": closure,
            "pending": dict(sorted(got.pending.items())),
            "unread": sorted(got.unread),
            "base_unknown": got.unknown,
            "base_own_builds": got.own_builds,
            **({"base_left": got.left} if got.left else {}),
        }
    return out


def hashes_for(record: dict, names) -> list[tuple[str, str, list]]:
    """(name, version, sha256s) of the named distributions of one closure record, for a hashed install."""
    packages = record["packages"]
    return [(n, packages[n]["version"], sorted(set(packages[n]["files"].values()))) for n in names]


def spec_key(variant) -> str:
    """A digest of everything a variant's closure is made from that the repository says without reading a tree:
    its pins, steps, allow rules, platforms, the commits of its components, its base's record and the bridge's
    pyproject.toml. While it stands, `lock` keeps the closure it recorded (a component's files at one commit do
    not change)."""
    from dataclasses import asdict

    parts = {
        "pip": variant.pip,
        # A step's `provides` only names what it makes importable (for a stand-in build's gates): no resolve reads it.
        "steps": [{k: v for k, v in step.items() if k != "provides"} for step in variant.steps],
        "args": variant.args,
        "allow": (variant.gates.get("pip_check") or {}) if isinstance(variant.gates, dict) else {},
        "platforms": list(variant.platforms),
        "components": {n: (c.get("git"), c.get("ref"), c.get("requirements")) for n, c in variant.components.items()},
        "base": asdict(bases.load_base(variant.base)),
        "bridge": BRIDGE.read_text(encoding="utf-8"),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _section(variants, pip_section: dict, old: dict | None, update: bool, trees: Trees) -> dict:
    """The family's `closure` section: {variant: {place: record}}. A record is kept while the variant's spec key
    is the same (and not `update`); the rest are resolved and checked now."""
    old = old or {}
    index = pip_index.host_index()
    out = {}
    for v in variants:
        prev = old.get(v.name) or {}
        places = {f"py{bases.load_base(v.base).python_version} {p}" for p in v.platforms}
        key = spec_key(v)
        if not update and set(prev) == places and all(r.get("spec") == key for r in prev.values()):
            out[v.name] = prev
        else:
            out[v.name] = {
                w: dict(r, spec=key) for w, r in lock_variant(v, pip_section, trees, index, index.cafile).items()
            }
    return out


def show(places: dict | None) -> str:
    """A variant's closure records in a table cell: per place, how many distributions and its inputs' digest."""
    if not places:
        return "-"
    return "; ".join(
        f"{where}: {len(rec['packages'])} dists {rec['inputs'][:12]}" for where, rec in sorted(places.items())
    )


def _packages(places: dict) -> dict:
    """What a closure installs, per place: each distribution's version and files (not why it is there)."""
    return {w: {n: (p["version"], p["files"]) for n, p in rec["packages"].items()} for w, rec in places.items()}


def lock(family: str, variants, pip_section: dict, old: dict | None, update: bool, trees: Trees) -> tuple[dict, list]:
    """`build.py lock` of a family's closures, writing nothing: (the new `closure` section, table rows)."""
    section = _section(variants, pip_section, old, update, trees)
    return section, lock_file.rows(f"{family}/closure", old, section, show)


def check(family: str, variants, pip_now: dict, locked: dict | None, trees: Trees) -> tuple:
    """`build.py lock --check` of a family's closures, writing nothing: each locked variant's closure resolved again
    from the pins as the index has them now, compared by what it installs: (table rows, anything moved?,
    [(name, error)])."""
    rows, moved, errors = [], False, []
    for name, places in sorted((locked or {}).items()):
        v = next((v for v in variants if v.name == name), None)
        try:
            now = _section([v], pip_now, None, True, trees)[name] if v else None
        except ToolkitError as e:
            errors.append((f"{family}/closure/{name}", e))
            rows.append([f"{family}/closure/{name}", show(places), "unresolved", "?"])
            continue
        flag = "no" if now and _packages(now) == _packages(places) else "yes"
        moved = moved or flag == "yes"
        rows.append([f"{family}/closure/{name}", show(places), show(now), flag])
    return rows, moved, errors


def check_section(closure, label: str) -> None:
    """Refuse a hand-edited section that is not what `lock` writes (SpecError naming the lock file and key)."""
    if not isinstance(closure, dict):
        raise SpecError(label, "closure", "expected {variant: {place: record}}")
    for variant, places in closure.items():
        if not isinstance(places, dict):
            raise SpecError(label, f"closure.{variant}", "expected {place: record}")
        for place, rec in places.items():
            key = f"closure.{variant}.{place}"
            if not isinstance(rec, dict) or not isinstance(rec.get("packages"), dict):
                raise SpecError(label, key, "expected a record with packages")
            for name, pkg in rec["packages"].items():
                where = f"{key}.packages.{name}"
                files = pkg.get("files") if isinstance(pkg, dict) else None
                if not isinstance(pkg, dict) or not isinstance(pkg.get("version"), str) or not files:
                    raise SpecError(label, where, "needs version and files")
                if not isinstance(files, dict):
                    raise SpecError(label, f"{where}.files", "expected {file: sha256}")
                for file, sha in files.items():
                    if not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
                        raise SpecError(label, f"{where}.files.{file}", "not a sha256 hex")
                via = pkg.get("via", [])
                if not (isinstance(via, list) and all(isinstance(v, str) for v in via)):
                    raise SpecError(label, f"{where}.via", "expected a list of names")
