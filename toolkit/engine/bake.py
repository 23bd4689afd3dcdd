"""A buildx bake file (JSON) for a set of targets: the build matrix as data, for any BuildKit builder.

Pure: invocations in, a dict out (the caller writes it). Each target is its invocation's `bake_target()`
(toolkit/engine/invocation.py): what `build.py build` would pass to `docker buildx build`. The gates are RUN steps of
the Dockerfile, so a target whose gates fail produces no image: bake's tags and `--push` only ever apply to gated
images."""

from __future__ import annotations

import re

from toolkit.errors import UsageError


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


def bake_file(invocations) -> dict:
    """`invocations`: (variant name, Invocation) in the order asked for. Returns the bake JSON document."""
    targets = {}
    for variant_name, invocation in invocations:
        name = target_name(variant_name)
        if name in targets:
            raise UsageError(f"two targets map to the bake name {name!r}")
        targets[name] = invocation.bake_target()
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}
