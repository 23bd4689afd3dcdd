"""A buildx bake file (JSON) for a set of staged targets: the build matrix as data, for any BuildKit builder.

Pure: plans and staged contexts in, a dict out (the caller writes it). Every target carries what `build.py build`
would pass to `docker buildx build`: context, Dockerfile, platforms, args, labels (input hash included), the
`<variant>` and `<variant>-<hash12>` tags, secrets, and registry cache when a cache reference is given. The gates
are RUN steps of the Dockerfile, so a target whose gates fail produces no image: bake's tags and `--push` only
ever apply to gated images.
"""

from __future__ import annotations

import re

from toolkit.context import build_labels
from toolkit.errors import UsageError
from toolkit.registry import hash_tag, with_registry


def target_name(variant_name: str) -> str:
    """Bake target names allow [A-Za-z0-9_-]; variant names may also hold '.'."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", variant_name)


def cache_refs(cache: str, variant) -> tuple:
    """Registry cache, one tag per target (`REF:<target>`), exported with every layer (mode=max). A variant also
    imports its family default's cache: variants of a family share most layers (cu13-x86 is half of cu13)."""
    ref = f"{cache}:{target_name(variant.name)}"
    pulls = [f"type=registry,ref={ref}"]
    if variant.family_default and variant.family_default != variant.name:
        pulls.append(f"type=registry,ref={cache}:{target_name(variant.family_default)}")
    return pulls, [f"type=registry,ref={ref},mode=max"]


def bake_target(plan, ctx, registry=None, cache=None, cache_from=None, images: tuple = ()) -> dict:
    """`images`: named contexts for the images only this machine makes, published (toolkit/local_images.py)."""
    target = {
        "context": str(ctx.path),
        "dockerfile": ctx.dockerfile.relative_to(ctx.path).as_posix(),
        "platforms": list(plan.variant.platforms),
        "args": dict(sorted({**plan.variant.args, **ctx.build_args}.items())),
        "labels": build_labels(plan, ctx),
        "tags": [with_registry(plan, registry).image, hash_tag(plan, ctx.short_hash, registry)],
    }
    if ctx.build_contexts or images:
        target["contexts"] = {**ctx.build_contexts, **dict(images)}
    if plan.secrets:
        target["secret"] = [f"id={sid},src={src}" for sid, src in plan.secrets]
    if cache:
        target["cache-from"], target["cache-to"] = cache_refs(cache, plan.variant)
    elif cache_from:
        target["cache-from"] = cache_refs(cache_from, plan.variant)[0]
    if plan.no_cache:
        target["no-cache"] = True
    return target


def bake_file(staged, registry=None, cache=None, cache_from=None) -> dict:
    """`staged`: (plan, context[, published images]) in the order asked for. Returns the bake JSON document."""
    targets = {}
    for plan, ctx, *images in staged:
        name = target_name(plan.name)
        if name in targets:
            raise UsageError(f"two targets map to the bake name {name!r}")
        targets[name] = bake_target(plan, ctx, registry, cache, cache_from, images[0] if images else ())
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}
