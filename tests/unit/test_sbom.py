"""`build.py sbom`'s pure part: the runner's inventory in, a valid CycloneDX 1.6 document out (no engine)."""

import hashlib
import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from toolkit.gates.sbom import inventory_problem, sbom_json, wheel_hashes

INVENTORY = {
    "runner": "verify-inventory",
    "format": 1,
    "interpreter": {"executable": "/opt/venv/bin/python", "implementation": "cpython", "version": [3, 11, 2]},
    "python": [
        {
            "name": "torch",
            "metadata_name": "torch",
            "version": "2.13.0+cpu",
            "license_field": "License-Expression",
            "licenses": ["BSD-3-Clause AND MIT"],
            "location": "/opt/venv/lib/python3.11/site-packages",
        },
        {
            "name": "jinja2",
            "metadata_name": "Jinja2",
            "version": "3.1.6",
            "license_field": "Classifier",
            "licenses": ["OSI Approved :: BSD License"],
            "location": "/opt/venv/lib/python3.11/site-packages",
        },
        {
            "name": "pip",
            "metadata_name": "pip",
            "version": "23.0.1",
            "license_field": "License",
            "licenses": ["MIT"],
            "location": "/opt/venv/lib/python3.11/site-packages",
        },
        {
            "name": "sglang-attn-bridge",
            "metadata_name": "sglang-attn-bridge",
            "version": "0.2.0",
            "license_field": None,
            "licenses": [],
            "location": "/opt/venv/lib/python3.11/site-packages",
            "direct_url": "file:///tmp/sglang-attn-bridge",
        },
    ],
    "debian": [
        {"package": "apt", "version": "2.6.1", "architecture": "amd64"},
        {"package": "libc6", "version": "2.36-9+deb12u13", "architecture": "amd64"},
    ],
}


@pytest.fixture
def wheelhouse(tmp_path):
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"torch bytes")
    (tmp_path / "Jinja2-3.1.6-py3-none-any.whl").write_bytes(b"jinja bytes")
    (tmp_path / "not-a-wheel.whl").write_bytes(b"x")
    (tmp_path / "constraints.txt").write_text("torch==2.13.0+cpu\n")
    return tmp_path


def test_wheel_hashes_are_the_files_sha256_by_normalized_name_and_version(wheelhouse):
    got = wheel_hashes(wheelhouse)
    assert got == {
        ("torch", "2.13.0+cpu"): hashlib.sha256(b"torch bytes").hexdigest(),
        ("jinja2", "3.1.6"): hashlib.sha256(b"jinja bytes").hexdigest(),
    }
    assert wheel_hashes(wheelhouse / "missing") == {} and wheel_hashes(None) == {}


def test_the_sbom_is_valid_cyclonedx_with_every_component(wheelhouse):
    text = sbom_json(INVENTORY, "miles:smoke", "ab" * 32, wheel_hashes(wheelhouse))
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    meta = doc["metadata"]["component"]
    assert meta["type"] == "container" and meta["name"] == "miles:smoke"
    assert {"name": "io.miles.input-hash", "value": "ab" * 32} in meta["properties"]
    by_purl = {c["purl"]: c for c in doc["components"]}
    assert set(by_purl) == {
        "pkg:pypi/torch@2.13.0%2Bcpu",
        "pkg:pypi/jinja2@3.1.6",
        "pkg:pypi/pip@23.0.1",
        "pkg:pypi/sglang-attn-bridge@0.2.0",
        "pkg:deb/debian/apt@2.6.1?arch=amd64",
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64",
    }
    torch = by_purl["pkg:pypi/torch@2.13.0%2Bcpu"]
    assert torch["licenses"] == [{"expression": "BSD-3-Clause AND MIT"}]
    assert torch["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(b"torch bytes").hexdigest()}]
    assert by_purl["pkg:pypi/jinja2@3.1.6"]["licenses"] == [{"license": {"name": "OSI Approved :: BSD License"}}]
    assert by_purl["pkg:pypi/pip@23.0.1"]["licenses"] == [{"license": {"id": "MIT"}}]
    assert "hashes" not in by_purl["pkg:pypi/pip@23.0.1"]  # no wheel of it in the wheelhouse: no hash claimed
    bridge = by_purl["pkg:pypi/sglang-attn-bridge@0.2.0"]
    assert "licenses" not in bridge
    assert {"name": "io.miles.direct-url", "value": "file:///tmp/sglang-attn-bridge"} in bridge["properties"]
    # every component hangs off the image in the dependency graph
    root = [d for d in doc["dependencies"] if d["ref"] == meta["bom-ref"]][0]
    assert len(root["dependsOn"]) == len(doc["components"])


def test_an_image_without_dpkg_has_python_components_only():
    doc = json.loads(sbom_json(dict(INVENTORY, debian=None), "img:x", None, {}))
    assert all(c["purl"].startswith("pkg:pypi/") for c in doc["components"])
    assert "properties" not in doc["metadata"]["component"]


@pytest.mark.parametrize(
    "data",
    [None, [], {"runner": "verify", "format": 1}, dict(INVENTORY, python=[{"name": 1}]), dict(INVENTORY, debian=[{}])],
)
def test_what_is_not_the_runners_inventory_is_refused(data):
    assert inventory_problem(data) is not None
    assert inventory_problem(INVENTORY) is None


def test_sbom_options_are_checked_before_the_engine_and_no_engine_is_exit_3(tmp_path):
    from support import no_engine, one_line, run_build_py

    env = no_engine(tmp_path)
    one_line(run_build_py("sbom", "--target", "smoke", "-o", str(tmp_path), env=env), 2, "is a folder")
    one_line(run_build_py("sbom", "--target", "smoke", "--image", "Not A Ref", env=env), 2, "--image")
    one_line(run_build_py("sbom", "--target", "no-such-target", env=env), 2, "unknown target")
    one_line(run_build_py("sbom", "--target", "smoke", "-o", str(tmp_path / "s.json"), env=env), 3, "engine")
    assert not (tmp_path / "s.json").exists()
