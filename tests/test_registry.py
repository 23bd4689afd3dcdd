"""Push after gates, against a real registry (Debian's docker-registry on 127.0.0.1): build -> gates -> tag -> push,
the printed digest pulled back and verified; a failing gate leaves the registry untouched; --skip-existing finds the
hash tag in the registry and says so."""

from __future__ import annotations

import re
import subprocess

import pytest
from registry_fixture import available, local_registry, shared_registry
from support import run_build_py

from toolkit.engine import registry as reg
from toolkit.engine.base_image import ensure_base
from toolkit.gates import sbom_attach
from toolkit.plan.build_plan import make_plan
from toolkit.spec.catalog import load_catalog

DIGEST_LINE = re.compile(r"^digest: (\S+)@(sha256:[0-9a-f]{64})$", re.M)


def oci_manifest(host: str, repository: str, digest: str) -> dict:
    """An OCI manifest from the registry (it serves one only to a client that says it accepts that type)."""
    import json
    import urllib.request

    want = urllib.request.Request(
        f"http://{host}/v2/{repository}/manifests/{digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(want, timeout=10) as r:
        return json.loads(r.read())


def test_refs_are_qualified_by_the_registry():
    plan = make_plan(load_catalog().resolve("smoke"), revision="r")
    assert reg.hash_tag(plan, "0123456789ab") == "miles:smoke-0123456789ab"
    assert reg.hash_tag(plan, "0123456789ab", "127.0.0.1:5000") == "127.0.0.1:5000/miles:smoke-0123456789ab"
    assert reg.with_registry(plan, "ghcr.io/org/").image == "ghcr.io/org/miles:smoke"
    assert reg.with_registry(plan, None) is plan
    assert reg.repository_of("127.0.0.1:5000/miles:smoke-abc") == "127.0.0.1:5000/miles"
    assert reg.repository_of("localhost:5000/miles") == "localhost:5000/miles"
    assert reg.registry_host("ghcr.io/org/miles:x") == "ghcr.io"
    assert reg.registry_host("localhost/miles:x") == "localhost"
    assert reg.registry_host("org/miles:x") == "docker.io"
    assert reg.registry_host("miles:x") == "docker.io"


@pytest.fixture
def registry():
    """The registry shared by this test process (tests use their own namespace in it)."""
    if not available():
        pytest.fail("docker-registry is not installed (ci/setup.sh installs it)")
    return shared_registry()


def drop_refs(docker_client, host: str) -> None:
    """Remove every local tag and digest reference into the registry at `host` (images stay if used elsewhere)."""
    import docker.errors

    for image in docker_client.images.list():
        for ref in image.tags + image.attrs.get("RepoDigests", []):
            if ref.startswith(host + "/"):
                try:
                    docker_client.images.remove(ref)
                except docker.errors.ImageNotFound:  # a digest reference that went with its last tag
                    pass


@pytest.fixture
def drop_local_tags(docker_client, registry):
    yield
    drop_refs(docker_client, registry.host)


@pytest.fixture
def own_registry():
    """A registry of its own, for a test that stops it."""
    if not available():
        pytest.fail("docker-registry is not installed (ci/setup.sh installs it)")
    with local_registry() as r:
        yield r


def _drop_local(docker_client, repository: str) -> None:
    """Remove every local tag of `repository` (so a later pull really comes from the registry)."""
    for image in docker_client.images.list(name=repository):
        for ref in image.tags:
            if ref.startswith(repository + ":"):
                docker_client.images.remove(ref)


@pytest.mark.docker
def test_remote_lookup_says_yes_no_or_cannot_tell(own_registry, docker_client):
    registry = own_registry
    variant = load_catalog().resolve("smoke")
    ensure_base(docker_client, variant)  # a small local image to push (made with debootstrap when missing)
    base = variant.base
    ref = f"{registry.host}/lookup/base:one"
    docker_client.images.get(base).tag(f"{registry.host}/lookup/base", "one")
    try:
        assert reg.remote_digest(ref) is None
        pushed = [
            m for m in docker_client.images.push(f"{registry.host}/lookup/base", tag="one", stream=True, decode=True)
        ]
        digest = next(m["aux"]["Digest"] for m in pushed if "aux" in m)
        assert reg.remote_digest(ref) == digest
        assert reg.remote_digest(f"{registry.host}/lookup/base:two") is None
        assert reg.remote_digest(f"{registry.host}/lookup/other:one") is None
    finally:
        drop_refs(docker_client, registry.host)
    registry.proc.terminate()
    registry.proc.wait()
    with pytest.raises(reg.LookupFailed, match="connection refused"):
        reg.remote_digest(ref)


@pytest.mark.docker
@pytest.mark.slow
def test_push_after_gates_then_pull_by_digest_and_verify(registry, docker_client, drop_local_tags):
    ns = f"{registry.host}/build"
    proc = run_build_py("build", "--target", "smoke", "--push", "--registry", ns)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hash12 = re.search(r"input hash ([0-9a-f]{12})", proc.stdout).group(1)
    ((repo, digest),) = DIGEST_LINE.findall(proc.stdout)
    assert repo == f"{ns}/miles"
    assert "build/miles" in registry.catalog()
    # The two tags, and the referrers tag (this registry has no referrers API) under which the image's SBOM hangs.
    referrers_tag = "sha256-" + digest.removeprefix("sha256:")
    assert registry.tags("build/miles") == sorted(["smoke", f"smoke-{hash12}", referrers_tag])
    (sbom,) = sbom_attach.attached(f"{repo}@{digest}")
    assert f"sbom: {repo}@{digest}: attached {sbom} (application/vnd.cyclonedx+json)" in proc.stdout
    layer = oci_manifest(registry.host, "build/miles", sbom)["layers"][0]
    doc = registry.get(f"/v2/build/miles/blobs/{layer['digest']}")
    assert doc["bomFormat"] == "CycloneDX" and doc["metadata"]["component"]["name"] == f"{repo}@{digest}"
    assert any(c["purl"].startswith("pkg:pypi/torch@") for c in doc["components"])
    lines = proc.stdout.splitlines()
    assert max(i for i, ln in enumerate(lines) if ln.startswith("tagged ")) < min(
        i for i, ln in enumerate(lines) if ln.startswith("pushed ")
    )
    assert reg.remote_digest(f"{repo}:smoke-{hash12}") == digest

    # Pull back by digest (local tags of that repository dropped first) and run the gates in what came back.
    _drop_local(docker_client, repo)
    ref = f"{repo}@{digest}"
    pull = subprocess.run(["docker", "pull", ref], capture_output=True, text=True, timeout=600)
    assert pull.returncode == 0, pull.stderr
    assert ref in docker_client.images.get(ref).attrs["RepoDigests"]
    verify = run_build_py("verify", "--target", "smoke", "--image", ref)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # Same inputs again: the registry already holds the hash tag, so nothing is built or pushed, and it says where.
    again = run_build_py("build", "--target", "smoke", "--push", "--skip-existing", "--registry", ns)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"skip: {repo}:smoke-{hash12} exists in registry {ns} ({repo}@{digest})" in again.stdout
    assert "pushed" not in again.stdout and "built" not in again.stdout

    # A revert: the hash tag is there, but the moving tag points at another image. Not skipped: the (cached) build
    # is pushed again, which moves the tag back.
    other = docker_client.images.get(load_catalog().resolve("smoke").base)
    other.tag(repo, "smoke")
    for _ in docker_client.images.push(repo, tag="smoke", stream=True, decode=True):
        pass
    assert reg.remote_digest(f"{repo}:smoke") != digest
    back = run_build_py("build", "--target", "smoke", "--push", "--skip-existing", "--registry", ns)
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"note: {repo}:smoke-{hash12} is in the registry but {repo}:smoke does not point at it" in back.stdout
    assert "skip:" not in back.stdout
    assert reg.remote_digest(f"{repo}:smoke") == reg.remote_digest(f"{repo}:smoke-{hash12}")


@pytest.mark.docker
@pytest.mark.slow
def test_failing_gate_leaves_the_registry_untouched(registry, project_copy, docker_client):
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + "\ndef broken(:\n")
    before = {repo: registry.tags(repo) for repo in registry.catalog()}
    ns = f"{registry.host}/gatefail"
    proc = run_build_py("build", "--target", "smoke", "--push", "--registry", ns, cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "sglang_attn_bridge" in proc.stdout
    assert "tagged" not in proc.stdout and "pushed" not in proc.stdout
    assert {repo: registry.tags(repo) for repo in registry.catalog()} == before
    assert "gatefail/miles" not in registry.catalog() and registry.tags("gatefail/miles") == []
    assert not docker_client.images.list(name=f"{ns}/miles")
