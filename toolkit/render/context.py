"""Stage the build context: exactly the files a target's Dockerfile reads, and the input hash over them.

A staged folder (instead of the project root plus a .dockerignore) makes the context explicit: what is hashed is
what BuildKit receives, so the input hash can never miss an input (the failure mode of hand-kept glob lists).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from toolkit.cleanup import Scope
from toolkit.gates.report import NONCE_ARG, gate_nonce
from toolkit.lock.policy import artifact_origin
from toolkit.plan import artifacts
from toolkit.plan.sources import LABEL_PREFIX, git_components, remote, resolve
from toolkit.render.gate_bundle import config_text, payload_files
from toolkit.spec.catalog import ROOT
from toolkit.steps import views
from toolkit.steps.closure import FILE as CLOSURE_FILE
from toolkit.steps.closure import requirements_text

BUILD_DIR = ROOT / "build"
# What a copy of the project needs to render, stage and build every target (tests and benches copy exactly this).
PROJECT_ITEMS = ("build.py", "toolkit", "images", "templates", "verify", "overlay_guard", "bridge", "image_tools")
INPUT_HASH_LABEL = "io.miles.input-hash"  # every image a build makes carries it (build_labels below)
VARIANT_LABEL = "io.miles.variant"  # the target an image was built for (written by templates/partials/labels.j2)
LOCAL_IMAGE_LABEL = "io.miles.local-image"  # an image made on this machine by `docker import` (base, wheelhouse)
STAGING_PREFIX, SOURCES_PREFIX = ".staging-", ".sources-"  # stage()'s private folders under build/<target>/
NEUTRAL = ("linux/amd64",)  # the platform content_hash renders for
BRIDGE_EXCLUDE = {"tests", "bench", "build", "dist", "__pycache__", ".pytest_cache"}
IMAGE_TOOLS = ROOT / "image_tools"  # stdlib scripts that build steps run inside the image (context folder tools/)


@dataclass(frozen=True)
class Context:
    path: Path
    dockerfile: Path
    input_hash: str  # sha256 hex over the Dockerfile, every context file and the resolved spec
    content_hash: str = ""  # the same, blind to the variant's name and platforms (content_hash below)
    sources: tuple = ()  # toolkit.plan.sources.Source per git component: the named build contexts
    sources_dir: Path | None = None  # the private folder holding the local `--source` trees, if any

    @property
    def short_hash(self) -> str:
        return self.input_hash[:12]

    @property
    def build_contexts(self) -> dict:
        """`--build-context NAME=VALUE` pairs: one named context per git component."""
        return {s.context_name: s.context for s in self.sources}

    @property
    def gate_nonce(self) -> str:
        """The gate step's nonce (toolkit/gates/report.py): one per content, deterministic."""
        return gate_nonce(self.content_hash or self.input_hash)

    @property
    def build_args(self) -> dict:
        """The toolkit's own build args: the gate step's nonce, which only the gate step reads (its `ARG` stands
        just before it, so no earlier layer's cache depends on it), and BuildKit's: a git named context keeps its
        `.git`, so a tree a step copies into the image is a checkout at the pinned commit (upstream's CI moves it
        with `git fetch`)."""
        args = {NONCE_ARG: self.gate_nonce}
        if self.sources:
            args["BUILDKIT_CONTEXT_KEEP_GIT_DIR"] = "1"
        return args


def build_labels(plan, ctx: Context) -> dict:
    """The labels a build applies: the plan's, the input hash, which source each git component came from (the
    commit the lock resolved, a `--ref`, or a local tree), each artifact's URL and digest (or that it is pending),
    and, for each step with a prebuilt wheel, what it installed."""
    labels = dict(plan.labels)
    labels[INPUT_HASH_LABEL] = ctx.input_hash
    for s in ctx.sources:
        labels[LABEL_PREFIX + s.name] = s.origin
    for name, record in plan.variant.artifacts.items():
        labels[LABEL_PREFIX + name] = artifact_origin(record)
    labels.update(artifacts.build_labels(views(plan.variant, plan.wheels)))
    return dict(sorted(labels.items()))


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def context_files(plan) -> dict:
    """Map of context-relative path -> source file. Pure function of the plan and the project tree."""
    files = {}
    bridge = ROOT / "bridge"
    for dirpath, dirnames, filenames in os.walk(bridge):
        dirnames[:] = sorted(d for d in dirnames if d not in BRIDGE_EXCLUDE and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            if not name.endswith((".pyc", ".pyo")):
                s = Path(dirpath) / name
                files[f"bridge/{s.relative_to(bridge).as_posix()}"] = s
    for name, path in payload_files().items():
        files[f"gates/{name}"] = path
    for tool in sorted(IMAGE_TOOLS.glob("*.py")):
        files[f"tools/{tool.name}"] = tool
    for p in plan.variant.patches:
        files[f"patches/{Path(p['file']).name}"] = ROOT / p["file"]
    return dict(sorted(files.items()))


def plan_hash(plan, dockerfile_text: str, files: dict | None = None, sources=None) -> str:
    """The input hash of a rendered plan: what the build labels and tags, and what CI compares across revisions.
    Covers the Dockerfile, the resolved spec (with what the lock pins: each tracked component's commit, each
    artifact's URL, size and sha256), every context file, the gate config and the source of every git
    component (the pinned commit, or the content of a local `--source`): what goes into the image, nothing about
    the host (which secrets a host hands the build, its CA bundle say, never changes the hash)."""
    if sources is None:  # no staging: every git component at its pin
        sources = [remote(name, c) for name, c in git_components(plan.variant).items()]
    h = hashlib.sha256()
    for src in sources:
        h.update(f"source\0{src.name}\0{src.digest}\0".encode())
    h.update(b"dockerfile\0" + dockerfile_text.encode() + b"\0")
    h.update(b"spec\0" + json.dumps(plan.variant.as_dict(), sort_keys=True).encode() + b"\0")
    for rel, src in (context_files(plan) if files is None else files).items():
        fh = hashlib.sha256()
        with open(src, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                fh.update(chunk)
        h.update(rel.encode() + b"\0" + fh.hexdigest().encode() + b"\0")
    h.update(config_text(plan.gates).encode())
    h.update(b"closure\0" + requirements_text(plan.variant.closure).encode())
    return h.hexdigest()


def content_hash(plan, files: dict | None = None, sources=None) -> str:
    """The input hash of the same plan under a neutral name, tag suffix and platform: what the gate step's nonce
    derives from. Two builds of the same content share it whatever their target name or platforms (a one-platform
    build, or the `-arm64` twin, reuses the gate layer a two-platform build left in a shared cache: BuildKit keys
    each platform's layers apart by itself); any change to what goes into the image or to the gate config moves it."""
    from toolkit.render.dockerfile import render

    neutral = replace(
        plan, variant=replace(plan.variant, name="content", tag_suffix="content", description="", platforms=NEUTRAL)
    )
    return plan_hash(neutral, render(neutral), files, sources)


def stage(plan, dockerfile_text: str, build_dir: Path = BUILD_DIR, scope: Scope | None = None) -> Context:
    """Write a new private folder under build/<target>/: Dockerfile, bridge/, gates/ (verify/ + gates.json),
    patches/; and a second one for the local `--source` trees. Two builds at once never share one. Each folder
    joins `scope` as it is made (the command's clean-up scope, toolkit/cleanup.py); without one, a failure halfway
    removes what was made, and a context made without one is the caller's to remove or keep (`keep`)."""
    own = Scope() if scope is None else None
    scope = scope or own
    assert scope is not None
    try:
        files = context_files(plan)
        parent = build_dir / plan.name
        sources_dir = scope.mkdtemp(SOURCES_PREFIX, parent) if plan.sources else None
        sources = resolve(plan, sources_dir)  # type: ignore[arg-type]  # None only when there is nothing to stage
        digest = plan_hash(plan, dockerfile_text, files, sources)
        root = scope.mkdtemp(STAGING_PREFIX, parent)
        for rel, src in files.items():
            _link_or_copy(src, root / rel)
        (root / "gates").mkdir(exist_ok=True)
        (root / "gates" / "gates.json").write_text(config_text(plan.gates))
        (root / "patches").mkdir(exist_ok=True)
        (root / CLOSURE_FILE).write_text(requirements_text(plan.variant.closure))
        dockerfile = root / "Dockerfile"
        dockerfile.write_text(dockerfile_text)
    except BaseException:
        if own is not None:
            own.close()
        raise
    return Context(
        path=root,
        dockerfile=dockerfile,
        input_hash=digest,
        content_hash=content_hash(plan, files, sources),
        sources=sources,
        sources_dir=sources_dir,
    )


def kept(ctx: Context) -> Context:
    """The context as `keep` will place it (its final paths), nothing moved: a bake file can name it before any
    folder is kept, so a command that fails before its end keeps nothing."""
    final = ctx.path.parent / ctx.short_hash
    final_sources = ctx.path.parent / f"{ctx.short_hash}.sources" if ctx.sources_dir is not None else None
    sources = tuple(
        replace(s, context=str(final_sources / s.name)) if s.local and final_sources else s for s in ctx.sources
    )
    return replace(ctx, path=final, dockerfile=final / ctx.dockerfile.name, sources=sources, sources_dir=final_sources)


def keep(ctx: Context) -> Context:
    """Move a staged context to build/<target>/<input-hash12>/ and its local `--source` trees to
    build/<target>/<input-hash12>.sources/ (atomic renames), for a bake file that names them later. The same hash
    means the same content: when a folder is already there, it is reused."""
    final = ctx.path.parent / ctx.short_hash
    final_sources = ctx.path.parent / f"{ctx.short_hash}.sources" if ctx.sources_dir is not None else None
    for src, dst in ((ctx.path, final), (ctx.sources_dir, final_sources)):
        if src is None:
            continue
        assert dst is not None  # set whenever src is
        try:
            os.rename(src, dst)
        except OSError:
            if not dst.is_dir():
                raise
            shutil.rmtree(src, ignore_errors=True)
    sources = tuple(replace(s, context=str(final_sources / s.name)) if s.local else s for s in ctx.sources)
    return replace(ctx, path=final, dockerfile=final / ctx.dockerfile.name, sources=sources, sources_dir=final_sources)
