"""The inventory gate and `build.py sbom` against the real engine: the SBOM of the smoke image, and a build whose image
holds a distribution outside its derived set failing with exit 1, naming it."""

import json

import pytest
from support import edit_spec, run_build_py

from toolkit.render.dockerfile import bridge_version

pytestmark = pytest.mark.docker


def test_sbom_of_the_smoke_image_lists_torch_the_bridge_and_debian_packages(smoke_image, tmp_path):
    out = tmp_path / "smoke.cdx.json"
    proc = run_build_py("sbom", "--target", "smoke", "--image", smoke_image, "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert doc["metadata"]["component"]["name"] == smoke_image
    purls = [c["purl"] for c in doc["components"]]
    assert any(p.startswith("pkg:pypi/torch@") for p in purls), purls
    assert f"pkg:pypi/sglang-attn-bridge@{bridge_version()}" in purls
    assert any(p.startswith("pkg:deb/debian/") and "arch=" in p for p in purls), purls
    stdout = run_build_py("sbom", "--target", "smoke", "--image", smoke_image)
    assert stdout.returncode == 0 and json.loads(stdout.stdout)["components"] == doc["components"]


def test_a_distribution_outside_the_derived_set_fails_the_build_naming_it(project_copy, docker_client, smoke_image):
    """The copy's smoke spec no longer says the image holds the venv's own pip (`wheelhouse.beside`), so the image
    now installs a distribution its derived set lacks: the gate step must fail the build (exit 1), name it, and
    move no tag.

    Why not the brief's first idea, a pin line dropped from the constraints file: the wheelhouse is downloaded from
    that very file (`--no-deps`, one file per line), so the dropped distribution would be missing from the
    wheelhouse and the offline pip step would fail before any gate ran (and a changed constraints file is a new
    wheelhouse recipe: gigabytes downloaded again). Dropping the `beside` entry changes only the derived set, so
    every layer before the gate step comes from the smoke image's cache and the gate alone decides."""
    before = docker_client.images.get(smoke_image).id
    edit_spec(project_copy, "smoke", lambda data: data["wheelhouse"].pop("beside"))
    proc = run_build_py("--target", "smoke", cwd=project_copy)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "inventory" in output and "pip 23.0.1 (not in the lock)" in output, output
    assert docker_client.images.get(smoke_image).id == before
