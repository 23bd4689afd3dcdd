"""Every buildx (and docker client) call outside a build goes through engine.buildx / engine.docker: bounded, and
an unanswered one is exit 3 in one line naming the call, or the caller's own error (a registry lookup's)."""

import subprocess

import pytest

from toolkit.engine import builders, local_images, registry
from toolkit.engine import docker_engine as engine
from toolkit.errors import EngineUnavailable


@pytest.fixture
def unanswered(monkeypatch):
    """Every client command times out; buildx and docker are there."""
    monkeypatch.setattr(engine, "buildx_cmd", lambda: ["docker", "buildx"])
    monkeypatch.setattr(engine, "docker_cmd", lambda: "docker")
    monkeypatch.setenv("MILES_ENGINE_TIMEOUT", "7")

    def run(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", run)


@pytest.mark.parametrize(
    "call,named",
    [
        (lambda: builders.resolve("fleet"), "`docker buildx inspect fleet`"),
        (lambda: local_images.platforms_of("r:5000/x:1"), "`docker buildx imagetools inspect`"),
        (lambda: local_images._create_list("r:5000/x:1", ["r:5000/x@sha256:" + "a" * 64]), "imagetools create`"),
        (lambda: builders._context_host("fleet"), "`docker context inspect fleet`"),
    ],
)
def test_an_unanswered_call_is_exit_3_naming_it(unanswered, call, named):
    with pytest.raises(EngineUnavailable) as e:
        call()
    assert e.value.exit_code == 3 and named in str(e.value) and "within 7s" in str(e.value)


def test_an_unanswered_registry_lookup_is_a_failed_lookup(unanswered):
    with pytest.raises(registry.LookupFailed, match=r"registry lookup of r:5000/x:1 timed out after 3s"):
        registry._remote_digest("r:5000/x:1", 3)
