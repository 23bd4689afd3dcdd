"""One BuildKit build of one target, as a value: what `docker buildx build` runs and what a bake file's target says.

Both serialisations read the same fields, so a build and a bake of the same plan and context can never disagree
on the context, the named contexts, the build args, secrets, platforms, labels, tags or cache. Every value is one
argv word or one JSON string: nothing here passes through a shell.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from toolkit.engine.docker_engine import BuildSite
from toolkit.engine.registry import hash_tag
from toolkit.render.context import build_labels


def epoch_arg(plan) -> dict:
    """BuildKit's clock (the Dockerfile's `ARG SOURCE_DATE_EPOCH` holds the same value for the steps): the image's
    `created` time and its history's, and, with the exporter's rewrite-timestamp, every file time in its layers."""
    return {"SOURCE_DATE_EPOCH": str(plan.variant.source_date_epoch)}


@dataclass(frozen=True)
class Invocation:
    context: Path
    dockerfile: Path
    platforms: tuple
    build_args: tuple  # (name, value), sorted: the spec's args and BuildKit's own
    labels: tuple  # (name, value), sorted (toolkit/render/context.py build_labels)
    contexts: tuple  # (name, value): one named context per git component
    secrets: tuple  # (id, src): handed to BuildKit, never written into the context
    tags: tuple  # the moving tag, the input-hash tag, then upstream's names
    site: BuildSite = BuildSite()  # builder, this machine's images as named contexts, registry cache, push
    no_cache: bool = False

    @classmethod
    def of(cls, plan, ctx, site: BuildSite | None = None, registry=None, extra_tags=()) -> Invocation:
        """The build of `plan` on the staged context `ctx`; `plan`'s tag is already in `registry` when one is given
        (registry.with_registry), and the input-hash tag joins it there."""
        return cls(
            context=ctx.path,
            dockerfile=ctx.dockerfile,
            platforms=tuple(plan.variant.platforms),
            build_args=tuple(sorted({**plan.variant.args, **ctx.build_args, **epoch_arg(plan)}.items())),
            labels=tuple(build_labels(plan, ctx).items()),
            contexts=tuple(ctx.build_contexts.items()),
            secrets=tuple(plan.secrets),
            tags=(plan.image, hash_tag(plan, ctx.short_hash, registry), *extra_tags),
            site=site or BuildSite(),
            no_cache=plan.no_cache,
        )

    @property
    def hash_tag(self) -> str:
        return self.tags[1]

    @property
    def moving(self) -> tuple:
        """The tags a build moves besides the input-hash tag (which names the content, so it never moves)."""
        return (self.tags[0], *self.tags[2:])

    def pushed(self) -> Invocation:
        """The same build, pushed from the builder to every tag (the image lands in no engine)."""
        return replace(self, site=replace(self.site, push=self.tags))

    def argv(self, buildx=("docker", "buildx"), files=()) -> list:
        """The `docker buildx build` command line; `files`: options naming files only the caller knows (the
        image-id and metadata files), placed before the context."""
        docker_bin, plugin = buildx
        cmd = [docker_bin, *self.site.docker, plugin, "build", "--progress=plain", "-f", str(self.dockerfile)]
        cmd += ["--platform", ",".join(self.platforms)] + self.site.args()
        for sid, src in self.secrets:
            cmd += ["--secret", f"id={sid},src={src}"]
        for name, value in self.labels:
            cmd += ["--label", f"{name}={value}"]
        for name, value in self.contexts:
            cmd += ["--build-context", f"{name}={value}"]
        for name, value in self.build_args:
            cmd += ["--build-arg", f"{name}={value}"]
        if self.no_cache:
            cmd.append("--no-cache")
        return cmd + list(files) + [str(self.context)]

    def bake_target(self) -> dict:
        """The bake file's target. The builder is the bake command's (`docker buildx bake --builder`), and so are
        `--no-cache` and `--push`: they are options of the run, not of the file."""
        target = {
            "context": str(self.context),
            "dockerfile": self.dockerfile.relative_to(self.context).as_posix(),
            "platforms": list(self.platforms),
            "args": dict(self.build_args),
            "labels": dict(self.labels),
            "tags": list(self.tags),
        }
        if self.contexts or self.site.contexts:
            target["contexts"] = {**dict(self.contexts), **dict(self.site.contexts)}
        if self.secrets:
            target["secret"] = [f"id={sid},src={src}" for sid, src in self.secrets]
        if self.site.cache_from:
            target["cache-from"] = list(self.site.cache_from)
        if self.site.cache_to:
            target["cache-to"] = list(self.site.cache_to)
        return target
