"""Git components as BuildKit named build contexts: the pinned remote by default, a local tree with `--source`.

Every `git` component of a variant reaches the Dockerfile as the named context `src-<name>` (`COPY --from=`,
`RUN --mount=type=bind,from=`), never as a `git clone` in a RUN line. By default the context is the pinned remote,
`<git>#<ref>`, which BuildKit fetches itself. `build.py build --source NAME=PATH` replaces it with a local checkout
or a source tarball: that is how a developer builds a change before it lands, and how a host without access to
the remote builds at all. `--ref NAME=COMMIT` keeps the remote and changes only its commit, for one build (a pull
request that tests an unmerged upstream fix does this). A local tree is staged (copied without byte-code caches and
without its `.git`, which a git checkout gets back fresh: its HEAD commit only, `origin` the component's remote; a
tarball unpacked with its single top folder stripped), and its content digest replaces the pinned commit in the
input hash; the image's `io.miles.source.<name>` label records which was used.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import UsageError, short
from toolkit.plan.artifacts import WHEELS, file_name, wheel_dist
from toolkit.plan.source_archive import is_archive, unpack
from toolkit.plan.wheel_files import check_wheel, wheel_entries
from toolkit.spec.values import COMMIT_RE
from toolkit.steps import applies

CONTEXT_PREFIX = "src-"
LABEL_PREFIX = "io.miles.source."
SKIP_DIRS = {".git", "__pycache__"}
SKIP_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class Source:
    name: str  # the component's name in the spec
    context: str  # what `--build-context src-<name>=` receives: `<git>#<ref>` or a staged folder
    digest: str  # what the input hash covers: the pinned `<git>#<ref>`, or `sha256:<content>` of a local tree
    origin: str  # the label text: which source was used

    @property
    def context_name(self) -> str:
        return context_name(self.name)

    @property
    def local(self) -> bool:
        """A staged `--source` tree (its context is a folder), not the pinned remote."""
        return self.digest.startswith("sha256:")


def context_name(component: str) -> str:
    return f"{CONTEXT_PREFIX}{component}"


def git_components(variant) -> dict:
    return {name: c for name, c in sorted(variant.components.items()) if "git" in c}


def split_item(item: str) -> tuple:
    name, eq, path = item.partition("=")
    if not eq or not name or not path:
        raise UsageError(f"--source {short(item)}: expected NAME=PATH (a local checkout or a source tarball)")
    return name, path


def parse_overrides(items, variant) -> dict:
    """`NAME=PATH` pairs -> {name: absolute Path}; NAME a git component of the variant, PATH a folder or tarball,
    or `wheels` and a folder of prebuilt wheels (toolkit/plan/artifacts.py)."""
    known = git_components(variant)
    out = {}
    for item in items:
        name, path = split_item(item)
        if name == WHEELS and name not in known:
            out[name] = wheels_folder(item, path)
            continue
        if name not in known:
            listed = ", ".join(known) or "none"
            raise UsageError(
                f"--source {short(item)}: {short(name)} is not a git component of {variant.name} ({listed})"
            )
        try:
            p = local_path(path)
            usable = p.is_dir() or (p.is_file() and is_archive(p))
        except OSError as e:  # a name too long, a loop of links, no permission
            raise UsageError(f"--source {short(item)}: {e.strerror or type(e).__name__}") from None
        except (EOFError, zlib.error) as e:  # an archive cut short before its first header
            raise UsageError(f"--source {short(item)}: not a readable tar archive ({type(e).__name__})") from None
        if not usable:
            raise UsageError(f"--source {short(item)}: {short(path)} is neither a folder nor a tar archive")
        if name in out:
            raise UsageError(f"--source {short(name)}: given twice")
        out[name] = p
    return out


def local_path(path: str) -> Path:
    """`path` made absolute with every link followed; a loop of links (a link to itself) raises OSError (ELOOP),
    where Path.resolve raises RuntimeError on this Python."""
    p = Path(os.path.realpath(os.path.expanduser(path)))
    if p.is_symlink():  # realpath stops at a link it cannot follow: a loop
        os.stat(p)  # raises OSError ELOOP, naming the reason
    return p


def wheels_folder(item: str, path: str) -> Path:
    """`--source wheels=DIR`: a folder holding at least one wheel (by its file name)."""
    try:
        p = local_path(path)
        if not p.is_dir():
            raise UsageError(f"--source {short(item)}: {short(path)} is not a folder of wheels")
        names = [f.name for f in p.iterdir()]
    except OSError as e:  # a loop of links, no permission
        raise UsageError(f"--source {short(item)}: {e.strerror or type(e).__name__}") from None
    if not any(name.lower().endswith(".whl") for name in names):
        raise UsageError(f"--source {short(item)}: {short(path)} holds no wheel (NAME-VERSION-TAGS.whl)")
    return p


def used_wheels(folder: Path, variant) -> tuple:
    """The wheel files of `--source wheels=DIR` for the variant: each must replace a step's `prebuilt` artifact
    (the same distribution), one per step. A wheel no step takes is refused: a drop-in that is silently ignored
    would build something other than what was asked."""
    wanted: dict[str, str] = {}
    for step in variant.steps:
        if "prebuilt" in step and applies(step, variant.args):
            wanted[wheel_dist(file_name(variant.artifacts[step["prebuilt"]])) or ""] = step["prebuilt"]
    out: dict = {}
    for name, dist in wheel_entries(folder):
        if dist not in wanted:
            known = ", ".join(sorted(wanted)) or "none"
            raise UsageError(f"--source wheels: {short(name)} replaces no prebuilt step of {variant.name} ({known})")
        if dist in out:
            raise UsageError(f"--source wheels: {short(out[dist])} and {short(name)} are both {dist}; keep one")
        out[dist] = name
    return tuple(sorted(out.values()))


def overrides_for(variants, items) -> dict:
    """`--source` for several targets at once (bake): {variant name: the items naming one of its git components}.
    An item that no target can take is an error, as it is for one target."""
    names = {item: split_item(item)[0] for item in items}
    known = {v.name: git_components(v) for v in variants}
    for item, name in names.items():
        if name != WHEELS and not any(name in components for components in known.values()):
            listed = ", ".join(sorted({n for components in known.values() for n in components})) or "none"
            raise UsageError(f"--source {short(item)}: no target here has the git component {short(name)} ({listed})")
    prebuilt = {v.name for v in variants if any("prebuilt" in step for step in v.steps)}
    return {
        v: [i for i in items if names[i] in components or (names[i] == WHEELS and v in prebuilt)]
        for v, components in known.items()
    }


def split_ref(item: str) -> tuple:
    name, eq, commit = item.partition("=")
    if not eq or not name or not COMMIT_RE.fullmatch(commit):
        raise UsageError(f"--ref {short(item)}: expected NAME=COMMIT (a 40-hex commit of that component's remote)")
    return name, commit


def apply_refs(variant, items, sources=()):
    """`--ref NAME=COMMIT` pairs -> a copy of the variant whose git component NAME is pinned to COMMIT for this
    build (the remote stays; the input hash and the label follow the commit). NAME cannot also take `--source`."""
    if not items:
        return variant
    known = git_components(variant)
    local = {split_item(item)[0] for item in sources}
    components = dict(variant.components)
    for item in items:
        name, commit = split_ref(item)
        if name not in known:
            listed = ", ".join(known) or "none"
            raise UsageError(f"--ref {short(item)}: {name!r} is not a git component of {variant.name} ({listed})")
        if name in local:
            raise UsageError(f"--ref {name}: also given --source {name}; a build takes one of them")
        if components[name] is not known[name]:
            raise UsageError(f"--ref {name}: given twice")
        components[name] = {**known[name], "ref": commit}
    return dataclasses.replace(variant, components=components)


def refs_for(variants, items) -> dict:
    """`--ref` for several targets at once (bake): {variant name: the items naming one of its git components}."""
    names = {item: split_ref(item)[0] for item in items}
    known = {v.name: git_components(v) for v in variants}
    for item, name in names.items():
        if not any(name in components for components in known.values()):
            listed = ", ".join(sorted({n for components in known.values() for n in components})) or "none"
            raise UsageError(f"--ref {short(item)}: no target here has the git component {name!r} ({listed})")
    return {v: [i for i in items if names[i] in components] for v, components in known.items()}


def remote(name: str, component: dict) -> Source:
    ref = f"{component['git']}#{component['ref']}"
    return Source(name=name, context=ref, digest=ref, origin=ref)


def _copy_tree(src: Path, dest: Path) -> None:
    """Copy a checkout: symlinks (to files or folders) stay links, never followed; `.git` and byte code left out."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        links = [d for d in dirnames if d not in SKIP_DIRS and (Path(dirpath) / d).is_symlink()]
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and d not in links)
        for fname in filenames + links:
            if fname.endswith(SKIP_SUFFIXES):
                continue
            s, d = Path(dirpath) / fname, dest / rel / fname
            if s.is_symlink():
                os.symlink(os.readlink(s), d)
            elif s.is_file():
                shutil.copy2(s, d)
            else:  # a FIFO would block the copy, a device has no place in a source tree
                raise UsageError(f"--source {short(str(src), quote=False)}: {short(str(s))} is not a regular file")


def tree_digest(root: Path) -> str:
    """sha256 over every path, its executable bit and its content (symlinks, to files or folders: their target),
    in sorted order; a top-level `.git` (made by `checkout_git_dir`) is left out."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        links = [d for d in dirnames if (Path(dirpath) / d).is_symlink()]
        dirnames[:] = sorted(d for d in dirnames if d not in links and not (dirpath == str(root) and d == ".git"))
        for fname in sorted(filenames + links):
            p = Path(dirpath) / fname
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                h.update(f"l {rel} {os.readlink(p)}\0".encode())
                continue
            fh = hashlib.sha256(p.read_bytes()).hexdigest()
            h.update(f"{'x' if os.access(p, os.X_OK) else 'f'} {rel} {fh}\0".encode())
    return "sha256:" + h.hexdigest()


def _git(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def checkout_git_dir(src: Path, dest: Path, remote_url: str | None) -> str | None:
    """Give a staged copy of a git checkout a `.git` of its own, so a tree a step copies into the image is a
    checkout there too (`git fetch origin REF` works, as in a pinned remote context): only the source's HEAD commit
    (shallow), `origin` the component's remote, nothing else of the source's `.git` (other branches, its config,
    credentials in a remote URL). The work tree stays the staged copy, uncommitted changes included. Returns the
    commit, or None when `src` is not a git work tree."""
    head = _git("rev-parse", "--verify", "HEAD^{commit}", cwd=src)
    top = _git("rev-parse", "--show-toplevel", cwd=src)
    if head.returncode != 0 or top.returncode != 0 or Path(top.stdout.strip()).resolve() != src.resolve():
        return None
    commit = head.stdout.strip()
    steps = [
        ("init", "-q"),
        ("fetch", "-q", "--depth", "1", src.resolve().as_uri(), commit),
        ("update-ref", "--no-deref", "HEAD", commit),
        ("read-tree", "HEAD"),
    ] + ([("remote", "add", "origin", remote_url)] if remote_url else [])
    for args in steps:
        run = _git(*args, cwd=dest)
        if run.returncode != 0:
            raise UsageError(
                f"--source {short(str(src), quote=False)}: git {args[0]} failed: {run.stderr.strip()[-200:]}"
            )
    return commit


def stage_local(name: str, path: Path, dest: Path, remote_url: str | None = None) -> Source:
    """Copy (or unpack) a local source into `dest` (made afresh) and digest what was staged. A git checkout keeps
    a `.git` of its own (`checkout_git_dir`): its commit joins the digest and the label."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    commit, checkout = "", None
    if path.is_dir():
        _copy_tree(path, dest)
        checkout = checkout_git_dir(path, dest, remote_url)
    else:
        commit = unpack(path, dest, f"--source {name}={short(str(path), quote=False)}")
    digest = tree_digest(dest)
    if checkout:
        digest = "sha256:" + hashlib.sha256(f"{digest}\0git {checkout}".encode()).hexdigest()
    # The label holds the name as escaped text: a newline or control character in a file name stays on one line.
    origin = f"local {short(path.name, quote=False)} {digest}" + (f" (archive of commit {commit})" if commit else "")
    origin += f" (git checkout of commit {checkout})" if checkout else ""
    return Source(name=name, context=str(dest), digest=digest, origin=origin)


def resolve(plan, staging_dir: Path) -> tuple:
    """Every git component of the plan as a Source: its `--source` override staged under `staging_dir`, or the pin."""
    out = []
    for name, component in git_components(plan.variant).items():
        local = plan.sources.get(name)
        if local:
            out.append(stage_local(name, Path(local), staging_dir / name, component.get("git")))
        else:
            out.append(remote(name, component))
    if plan.wheels:  # only the wheels a step takes are staged (and hashed)
        dest = staging_dir / WHEELS
        dest.mkdir(parents=True)
        for wheel in plan.wheels:  # checked again as it is copied: a wheel that became a link is refused
            check_wheel(Path(plan.sources[WHEELS]) / wheel)
            shutil.copy2(Path(plan.sources[WHEELS]) / wheel, dest / wheel, follow_symlinks=False)
        digest = tree_digest(dest)
        out.append(Source(name=WHEELS, context=str(dest), digest=digest, origin=f"local wheels {digest}"))
    return tuple(out)
