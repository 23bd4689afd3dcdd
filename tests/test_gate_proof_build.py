"""A spec whose `python` is not a Python (`/bin/true` runs nothing and exits 0) cannot get a tag: the bridge install
step proves the bridge is installed by a real Python, and the gate step proves, with this build's nonce, that the
gate runner ran; the build fails with exit 1 and one line, and no tag moves. A real image build (docker)."""

from __future__ import annotations

import secrets

import pytest
from support import edit_spec, one_line, remove_images, run_build_py

pytestmark = [pytest.mark.docker]


def _image_id(client, ref):
    import docker.errors

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def test_a_python_that_runs_nothing_fails_the_build_and_moves_no_tag(project_copy, docker_client):
    edit_spec(project_copy, "smoke", lambda data: data.update(python="/bin/true"))
    tag = f"proof-true-{secrets.token_hex(3)}:1"
    before = _image_id(docker_client, "miles:smoke")
    proc = run_build_py("build", "--target", "smoke", "--tag", tag, cwd=project_copy, timeout=900)
    made = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("tagged ")]
    remove_images(docker_client, *made)
    line = one_line(proc, 1, "build of smoke failed")
    assert "bridge install step" in line, line
    assert made == [] and _image_id(docker_client, tag) is None
    assert _image_id(docker_client, "miles:smoke") == before
