"""toolkit/gates/base_check.py against a real image: the smoke family's debootstrapped base plus a virtual environment
(pip and setuptools from Debian's own wheels) and a CUDA-style stub path, described by a base file written here."""

from __future__ import annotations

import os

import pytest
import yaml
from support import remove_images

from toolkit.engine.base_image import ensure_base
from toolkit.errors import UsageError
from toolkit.gates.base_check import RUN_LABEL, check_base
from toolkit.spec.bases import file_name, load_file
from toolkit.spec.catalog import load_catalog

IMAGE = f"miles-base-check:probe-{os.getpid()}"
STUB = "/usr/local/cuda/lib64/stubs/libcuda.so"
# What Debian 12 carries: python3 3.11.2, and the pip / setuptools wheels its python3-venv installs.
FACTS = {
    "python": {"version": "3.11", "full_version": "3.11.2", "command": "/opt/venv/bin/python",
               "site_packages": "/opt/venv/lib/python3.11/site-packages"},
    "torch": {"version": None, "cuda": None, "hip": None},
    "sglang": {"version": None, "tree": "/sgl-workspace/sglang", "pyproject": None},
    "cuda": {"nvcc": None, "home": "/usr/local/cuda", "driver_stub": STUB},
}  # fmt: skip
DISTRIBUTIONS = {"pip": "23.0.1", "setuptools": "66.1.1"}


@pytest.fixture(scope="module")
def probe_image(docker_client):
    """The smoke base (made with debootstrap when missing) with a venv, a stub file and an sglang tree, committed."""
    smoke = load_catalog().resolve("smoke")
    ensure_base(docker_client, smoke)
    script = f"python3 -m venv /opt/venv && mkdir -p {os.path.dirname(STUB)} /sgl-workspace/sglang && touch {STUB}"
    container = docker_client.containers.run(smoke.base, ["sh", "-c", script], detach=True, network_disabled=True)
    try:
        assert container.wait(timeout=300)["StatusCode"] == 0, container.logs().decode()
        repo, tag = IMAGE.split(":")
        container.commit(repository=repo, tag=tag)
    finally:
        container.remove(force=True)
    yield IMAGE
    remove_images(docker_client, IMAGE)


def _base_file(folder, **changes):
    """A base file for the probe image under `folder`, with dotted-key `changes` to its values."""
    raw: dict = {"image": IMAGE, "digest": {"value": None, "record": "a local image"}}
    raw["platforms"] = {"value": ["linux/amd64", "linux/arm64"], "record": "the smoke base"}
    raw["archs"] = {"value": None, "record": "none found: a CPU image"}
    raw["glibc"] = {"value": "2.36", "record": "Debian 12's libc6 2.36"}
    for section, facts in FACTS.items():
        raw[section] = {k: {"value": v, "record": "Debian 12 (the smoke base)"} for k, v in facts.items()}
    raw["distributions"] = {k: {"value": v, "record": "Debian 12's python3-venv"} for k, v in DISTRIBUTIONS.items()}
    for key, value in changes.items():
        section, _, name = key.partition("__")
        (raw[section][name] if name else raw[section])["value"] = value
    path = folder / file_name(IMAGE)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_file(path)


@pytest.mark.docker
def test_matching_facts_give_no_difference(tmp_path, probe_image, docker_client):
    assert check_base(docker_client, _base_file(tmp_path)) == []
    assert not docker_client.containers.list(all=True, filters={"label": RUN_LABEL})  # its container is removed


@pytest.mark.docker
def test_each_wrong_fact_is_one_line_naming_it(tmp_path, probe_image, docker_client):
    base = _base_file(tmp_path, python__version="3.12")
    assert check_base(docker_client, base) == [f"{IMAGE}: python.version: recorded '3.12', the image has '3.11'"]
    base = _base_file(tmp_path, distributions__pip="24.0", cuda__driver_stub="/usr/local/cuda/lib64/libcuda.so")
    diffs = check_base(docker_client, base)
    assert diffs == [
        f"{IMAGE}: distributions.pip: recorded '24.0', the image has '23.0.1'",
        f"{IMAGE}: cuda.driver_stub: recorded '/usr/local/cuda/lib64/libcuda.so', which the image does not have",
    ]


@pytest.mark.docker
def test_an_image_not_on_the_engine_is_a_usage_error(tmp_path, probe_image, docker_client):
    with pytest.raises(UsageError, match="is not present on this engine"):
        check_base(docker_client, _base_file(tmp_path), image="miles-base-check:does-not-exist")


@pytest.mark.docker
def test_a_base_with_an_older_glibc_than_recorded_is_a_difference(tmp_path, probe_image, docker_client):
    assert check_base(docker_client, _base_file(tmp_path, glibc="2.34")) == []  # a lower bound the image meets
    diffs = check_base(docker_client, _base_file(tmp_path, glibc="2.39"))
    assert diffs == [f"{IMAGE}: glibc: recorded 'at least 2.39', the image has '2.36'"]


@pytest.mark.docker
def test_verify_base_on_the_cli_prints_each_difference_and_exits_1(probe_image):
    """`build.py verify --target T --base --image IMG`: the target's base file against another image (the probe
    image stands in for the GPU base this host cannot pull): every recorded fact it lacks is a line, exit 1."""
    from support import run_build_py

    proc = run_build_py("verify", "--target", "cu13-x86", "--base", "--image", probe_image)
    assert proc.returncode == 1, proc.stderr
    assert "lmsysorg/sglang:v0.5.16: python.version: recorded '3.12', the image has '3.11'" in proc.stdout
    assert "lmsysorg/sglang:v0.5.16: glibc: recorded 'at least 2.34'" not in proc.stdout  # Debian 12 has 2.36
    assert proc.stdout.rstrip().splitlines()[-1].startswith("verify --base cu13-x86: lmsysorg/sglang:v0.5.16 differs")
