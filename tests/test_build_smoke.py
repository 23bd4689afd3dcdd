"""Integration, real engine: the smoke build end to end, broken inputs fail the build, tags never move on failure,
and secrets never reach a layer."""

from __future__ import annotations

import io
import json
import os
import secrets as pysecrets
import tarfile

import pytest
import yaml
from support import run_build_py

pytestmark = pytest.mark.docker


def run_in(client, image, *cmd):
    out = client.containers.run(image, list(cmd), remove=True, network_disabled=True)
    return out.decode()


def test_smoke_image_imports_the_bridge_and_carries_labels(docker_client, smoke_image):
    out = run_in(
        docker_client,
        smoke_image,
        "/opt/venv/bin/python",
        "-c",
        "import sglang_attn_bridge, torch, transformers, triton; print(sglang_attn_bridge.__file__)",
    )
    assert "/opt/venv/lib/python3.11/site-packages/sglang_attn_bridge/" in out
    labels = docker_client.images.get(smoke_image).labels
    assert labels["io.miles.variant"] == "smoke"
    assert labels["org.opencontainers.image.base.name"] == "miles-base:bookworm-minbase-py311-git"
    assert len(labels["io.miles.spec-digest"]) == 64 and len(labels["io.miles.input-hash"]) == 64
    assert labels["org.opencontainers.image.revision"]
    # The content-hash tag points at the same image.
    hash_tag = f"miles:smoke-{labels['io.miles.input-hash'][:12]}"
    assert docker_client.images.get(hash_tag).id == docker_client.images.get(smoke_image).id


def test_noop_rebuild_is_fully_cached_and_skip_existing_skips(smoke_image):
    proc = run_build_py("--target", "smoke")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("[") and "FROM" not in ln]
    assert steps and all(ln.rstrip().endswith("cached") for ln in steps), proc.stdout
    proc = run_build_py("--target", "smoke", "--skip-existing")
    assert proc.returncode == 0 and "skip:" in proc.stdout


def test_broken_bridge_fails_the_build_names_the_module_and_keeps_the_tag(project_copy, docker_client, smoke_image):
    before = docker_client.images.get(smoke_image).id
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + "\ndef broken(:\n")
    proc = run_build_py("--target", "smoke", cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "sglang_attn_bridge" in proc.stdout
    assert "FAILED step:" in proc.stdout and "-m verify" in proc.stdout
    assert docker_client.images.get(smoke_image).id == before


def test_gate_for_a_missing_module_fails_the_build(project_copy, docker_client, smoke_image):
    before = docker_client.images.get(smoke_image).id
    spec = project_copy / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["gates"]["imports"].append("miles_no_such_module")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_build_py("--target", "smoke", cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "miles_no_such_module" in proc.stdout
    assert docker_client.images.get(smoke_image).id == before
    # The end of the log names the failed check and why, not only the step.
    last = (proc.stdout + proc.stderr).strip().splitlines()[-1]
    assert "gate step: 1 of " in last and "import miles_no_such_module: ModuleNotFoundError" in last, last


# Appended to the bridge's __init__.py: the function transformers holds for "triton" raises. Through the bridge's
# public contract only (register() and AttentionInterface), so it breaks the bridge however its inside is laid out.
ATTENTION_RAISES = """

_real_register = register


def register(name="triton"):
    from transformers import AttentionInterface

    registered = _real_register(name)
    real = AttentionInterface()[registered]

    def raising(*args, **kwargs):
        raise RuntimeError("seeded: the bridge's attention raises")

    raising.__module__ = real.__module__
    AttentionInterface.register(registered, raising)
    return registered
"""


def test_bridge_whose_attention_raises_fails_the_build_and_keeps_the_tag(project_copy, docker_client, smoke_image):
    """Every other gate passes such a bridge (it imports, compiles, registers; the doctor skips its self-check
    without a GPU); the bridge-attention gate calls it, forward and backward, and fails the build."""
    tag = f"miles-gates-attn:{pysecrets.token_hex(4)}"  # a tag of this test's own: other builds move miles:smoke
    image = docker_client.images.get(smoke_image)
    image.tag(*tag.split(":"))
    try:
        init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
        init.write_text(init.read_text() + ATTENTION_RAISES)
        proc = run_build_py("--target", "smoke", "--tag", tag, cwd=project_copy)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1]
        assert "command bridge-attention" in last and "seeded: the bridge's attention raises" in last, last
        assert "PASS  command     bridge-doctor" not in proc.stdout  # only failures are listed under the failed step
        assert docker_client.images.get(tag).id == image.id
    finally:
        docker_client.images.remove(tag, noprune=True)


def _image_bytes(client, image) -> bytes:
    """Every byte of every layer (and the config) of an image, as `docker save` exports it."""
    raw = b"".join(client.images.get(image).save(named=True))
    chunks = [raw]
    with tarfile.open(fileobj=io.BytesIO(raw)) as outer:
        for member in outer.getmembers():
            if member.isfile() and member.name.endswith("layer.tar"):
                chunks.append(outer.extractfile(member).read())
    return b"".join(chunks)


def test_secrets_never_land_in_a_layer(project_copy, tmp_path, docker_client, smoke_image):
    marker = f"MILES-SECRET-{pysecrets.token_hex(16)}"
    fake_ca = tmp_path / "ca.pem"
    fake_ca.write_text(f"-----BEGIN CERTIFICATE-----\n{marker}\n-----END CERTIFICATE-----\n")
    extra = tmp_path / "token"
    extra.write_text(marker + "-extra")
    # Make the bridge step run (not cached) so the secret is really mounted into a step of this build.
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + f"\n# secret-test {pysecrets.token_hex(4)}\n")
    env = dict(os.environ, PIP_CERT=str(fake_ca))
    tag = "miles-secret-test:latest"
    proc = run_build_py(
        "--target",
        "smoke",
        "--tag",
        tag,
        "--secret",
        f"id=extra,src={extra}",
        "--progress",
        "plain",
        cwd=project_copy,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--mount=type=secret,id=pip-ca" in proc.stdout  # the step that used it ran in this build
    data = _image_bytes(docker_client, tag)
    assert len(data) > 10_000_000
    assert marker.encode() not in data
    history = json.dumps(docker_client.api.history(tag))
    assert marker not in history
    docker_client.images.remove(tag, force=True)
