"""Image references in a target registry, and whether an image with a given input hash is already there.

Remote lookups go through `docker buildx imagetools inspect`: it reads the manifest only (nothing is pulled), with
the same credentials (`docker login`) and the same plain-HTTP rule for loopback registries as a push.
"""

from __future__ import annotations

import dataclasses
import json

from toolkit.engine import docker_engine as engine
from toolkit.retry import retried, transient


class LookupFailed(Exception):
    """The registry could not say yes or no (unreachable, unauthorized): the caller builds instead of guessing."""


def qualify(ref: str, registry: str | None) -> str:
    """`miles:smoke` -> `REGISTRY/miles:smoke` (REGISTRY may carry a namespace: `ghcr.io/org`)."""
    return f"{registry.rstrip('/')}/{ref}" if registry else ref


def names_registry(ref: str) -> bool:
    """Whether `ref` already starts with a registry (Docker's rule: a first component with '.' or ':', or
    'localhost')."""
    first, sep, _ = ref.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


def with_registry(plan, registry: str | None):
    """The plan with its moving tag inside the registry; a tag that already names a registry stays as written."""
    if not registry or names_registry(plan.image):
        return plan
    return dataclasses.replace(plan, image=qualify(plan.image, registry))


def hash_tag(plan, short_hash: str, registry: str | None = None) -> str:
    """The content-addressed tag `<repository>:<variant>-<hash12>`, in the registry when one is given."""
    return qualify(f"{plan.variant.repository}:{plan.variant.tag_suffix}-{short_hash}", registry)


def repository_of(ref: str) -> str:
    """`host:5000/miles:smoke-abc` -> `host:5000/miles` (the part a by-digest reference keeps)."""
    name, _, tag = ref.rpartition(":")
    return name if name and "/" not in tag else ref


def registry_host(ref: str) -> str:
    """The registry a reference points at (Docker's rule: a first component with '.' or ':' or 'localhost')."""
    return ref.partition("/")[0] if names_registry(ref) else "docker.io"


def remote_digest(ref: str, timeout: float = 120) -> str | None:
    """The manifest digest of `ref` in its registry, None when the registry says it does not exist; a transient
    failure (a 5xx, a dropped connection) is asked again (toolkit/retry.py)."""
    return retried(
        lambda: _remote_digest(ref, timeout), lambda e: isinstance(e, LookupFailed) and transient(str(e)), what=ref
    )


def _remote_digest(ref: str, timeout: float) -> str | None:
    run = engine.buildx(
        "imagetools",
        "inspect",
        "--format",
        "{{json .Manifest}}",
        ref,
        timeout=timeout,
        on_timeout=lambda seconds: LookupFailed(f"registry lookup of {ref} timed out after {seconds:.0f}s"),
    )
    if run.returncode == 0:
        try:
            return json.loads(run.stdout)["digest"]
        except (ValueError, KeyError, TypeError):
            raise LookupFailed(f"registry lookup of {ref}: unexpected answer {run.stdout[:200]!r}") from None
    err = " ".join(run.stderr.split())
    if err.endswith(": not found") or "manifest unknown" in err or "name unknown" in err.lower():
        return None
    raise LookupFailed(f"registry lookup of {ref} failed: {err[:300] or f'exit {run.returncode}'}")


def _tags(moving) -> tuple:
    return (moving,) if isinstance(moving, str) else tuple(moving or ())


def registry_state(ref: str, moving=None) -> tuple:
    """(digest of `ref` in its registry or None, note). With `moving` (a tag or several), the digest counts only
    when each of them points at the same image: after a revert the hash tag exists but the moving tag points at a
    newer image, and an `--image-tag` name may not exist yet."""
    digest = remote_digest(ref)
    for tag in _tags(moving) if digest else ():
        if remote_digest(tag) != digest:
            return None, f"{ref} is in the registry but {tag} does not point at it: building (cached) to move it"
    return digest, None


def find_existing(client, ref: str, registry: str | None, pushing: bool, moving=None) -> tuple:
    """Where an image tagged `ref` (a hash tag) already is: ("locally" | "in registry R" | None, note or None).

    Locally, the hash tag counts only when every moving tag (`--tag` or the default, and `--image-tag`'s names)
    points at the same image too: a skip must leave every tag where a build would have put it.
    With a registry to push to, only the registry counts (a local image alone would leave the registry without it),
    and only when the moving tag (`moving`, e.g. REGISTRY/miles:smoke) points at the same image (registry_state).
    A lookup that fails is reported in the note and counts as absent: building again is always safe.
    """
    if not pushing:
        local = engine.image_id(client, ref)
        for tag in _tags(moving) if local else ():
            if engine.image_id(client, tag) != local:
                return None, f"{ref} exists locally but {tag} does not point at it: building (cached) to move it"
        if local:
            return "locally", None
    if registry or pushing:
        try:
            digest, note = registry_state(ref, moving if pushing else None)
        except LookupFailed as e:
            return None, str(e)
        if note:
            return None, note
        if digest:
            return f"in registry {registry or registry_host(ref)} ({repository_of(ref)}@{digest})", None
    if pushing and engine.image_id(client, ref):
        return None, f"{ref} exists locally but not in {registry or registry_host(ref)}: building (cached) to push it"
    return None, None
