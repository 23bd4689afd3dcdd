"""Images this machine makes itself (a debootstrapped base, the wheelhouse), and how a builder gets them.

The Dockerfile names them by their local tags (`FROM miles-base:...`, `--mount=from=miles-wheelhouse:...`). The
default engine's builder reads them from its own image store. Any other builder, a build of several platforms, and
a build that shares registry cache, gets them from the registry instead: each platform's image is made here and
pushed as `<registry>/<name>-<arch>`, the platforms are joined into one manifest list `<registry>/<name>`, and the
build maps the Dockerfile's name to that list by digest with a named context (`--build-context
NAME=docker-image://REPO@sha256:...`; BuildKit picks each platform's image from it). The Dockerfile, and so the
input hash, is the same either way, and every builder that shares a cache starts from the same bytes.

A list already in the registry with every platform asked for is used as it is: the base's tag names what went in,
the wheelhouse's tag is a digest of its recipe.
"""

from __future__ import annotations

import json

from toolkit.engine import docker_engine as engine
from toolkit.engine import registry
from toolkit.engine.base_image import base_ref, ensure_base, host_platform
from toolkit.errors import BuildFailed, UsageError
from toolkit.plan.wheelhouse import ensure_wheelhouse_image, home_platform, image_ref, recipe


def names(variant) -> list:
    """The image names the Dockerfile uses that only this machine can make."""
    made = [variant.base] if variant.base_build else []
    return made + ([image_ref(variant)] if variant.wheelhouse else [])


def check_platforms(variant) -> None:
    """Every platform asked for has wheels (exit 2 before anything runs); a debootstrapped base has every one."""
    for platform in variant.platforms if variant.wheelhouse else ():
        recipe(variant, platform)


def needs_registry(builder, variant, cache: bool) -> bool:
    """Whether the builder must read this machine's images from a registry (see the module docstring): another
    builder, several platforms, a platform other than the one the Dockerfile's names hold here, or shared cache."""
    foreign = variant.base_build and any(p != host_platform() for p in variant.platforms)
    foreign = foreign or (variant.wheelhouse and any(p != home_platform(variant) for p in variant.platforms))
    return builder.name is not None or len(variant.platforms) > 1 or cache or bool(foreign)


def ensure(client, variant, platforms, log=print, scope=None) -> dict:
    """Make what is missing locally; return {Dockerfile name: {platform: local tag}}."""
    made: dict = {}
    for platform in platforms:
        if variant.base_build:
            ensure_base(client, variant, log=log, scope=scope, platform=platform)
            made.setdefault(variant.base, {})[platform] = base_ref(variant, platform)
        if variant.wheelhouse:
            local = ensure_wheelhouse_image(client, variant, log=log, scope=scope, platform=platform)
            made.setdefault(image_ref(variant), {})[platform] = local
    return made


def publish(client, variant, platforms, reg: str | None, log=print, scope=None) -> tuple:
    """Push this machine's images for `platforms` to `reg` (one manifest list per name, made only when missing);
    return the named contexts ((name, docker-image://REPO@DIGEST), ...) that point a build at them."""
    if not reg:
        raise UsageError(
            f"{variant.name}: the builder reads {', '.join(names(variant))} from a registry: add --registry"
        )
    contexts = []
    for name, per_platform in ensure(client, variant, platforms, log=log, scope=scope).items():
        listed = registry.qualify(name, reg)
        digest = _list_digest(listed, platforms)
        if digest is None:
            sources = []
            for platform, local in per_platform.items():
                remote = registry.qualify(f"{name}-{platform.rpartition('/')[2]}", reg)
                engine.tag(client, local, remote)
                sources.append(f"{registry.repository_of(remote)}@{engine.push(client, remote, out=log)}")
            _create_list(listed, sources)
            digest = _list_digest(listed, platforms)
            if digest is None:
                raise BuildFailed(f"{listed}: the manifest list just made does not hold {', '.join(platforms)}")
            log(f"published {listed}@{digest} ({', '.join(per_platform)})")
        contexts.append((name, f"docker-image://{registry.repository_of(listed)}@{digest}"))
    return tuple(contexts)


def platforms_of(ref: str) -> dict:
    """{platform: manifest digest} of a manifest list in its registry ({} when absent or a single image)."""
    run = engine.buildx("imagetools", "inspect", "--raw", ref)
    if run.returncode != 0:
        return {}
    doc = json.loads(run.stdout)
    found = {}
    for m in doc.get("manifests") or []:
        p = m.get("platform") or {}
        if p.get("os") == "unknown":  # attestation manifests
            continue
        found[f"{p.get('os')}/{p.get('architecture')}"] = m["digest"]
    return found


def _list_digest(ref: str, platforms) -> str | None:
    if not set(platforms) <= set(platforms_of(ref)):
        return None
    return registry.remote_digest(ref)


def _create_list(ref: str, sources: list) -> None:
    run = engine.buildx("imagetools", "create", "-t", ref, *sources)
    if run.returncode != 0:
        raise BuildFailed(f"imagetools create {ref} failed: {' '.join(run.stderr.split())[:300]}")
