"""Transient registry errors are retried, boundedly: a real registry behind a proxy that answers its first calls
with HTTP 500 (as a fresh registry did to a HEAD of a manifest just pushed, under concurrent pushes). A manifest
lookup (`--skip-existing`'s, `buildx imagetools inspect`) through it is answered after the failures; a registry that
keeps failing is one error after the bounded retries (toolkit/retry.py), never a hang. (A push's own requests are
retried by the engine itself.)"""

from __future__ import annotations

import io
import tarfile
import time

import pytest
from registry_fixture import FlakyProxy, available, local_registry

from toolkit import retry
from toolkit.engine import docker_engine as engine
from toolkit.engine import registry

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not available(), reason="docker-registry is not installed (ci/setup.sh installs it)"),
]


def pushed_tiny_image(client, reg, name: str) -> str:
    """An image of one small file, imported (no base, no build) and pushed straight to `reg`; its digest."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        data = f"{name}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    ref = f"{reg.host}/retry/{name}"
    repo, _, tag = ref.rpartition(":")
    client.api.import_image_from_data(out.getvalue(), repository=repo, tag=tag)
    try:
        return engine.push(client, ref, out=lambda line: None)
    finally:
        client.images.remove(ref, noprune=True)


def test_a_registry_that_fails_its_first_calls_is_asked_again(docker_client):
    with local_registry() as reg:
        digest = pushed_tiny_image(docker_client, reg, "tiny:one")
        proxy = FlakyProxy(reg.host, fail=2)
        try:
            assert registry.remote_digest(f"{proxy.host}/retry/tiny:one") == digest
            assert proxy.failed == 2
            assert registry.remote_digest(f"{proxy.host}/retry/tiny:absent") is None  # not found is an answer
        finally:
            proxy.close()


def test_a_registry_that_keeps_failing_is_one_error_after_bounded_retries(docker_client):
    with local_registry() as reg:
        pushed_tiny_image(docker_client, reg, "tiny:two")
        proxy = FlakyProxy(reg.host, fail=10_000)
        try:
            started = time.monotonic()
            with pytest.raises(registry.LookupFailed, match="500"):
                registry.remote_digest(f"{proxy.host}/retry/tiny:two")
            assert time.monotonic() - started < 60
            assert proxy.failed >= retry.ATTEMPTS  # asked ATTEMPTS times, then given up
        finally:
            proxy.close()
