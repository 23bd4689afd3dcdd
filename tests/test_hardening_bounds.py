"""Every input the tool reads from outside is bounded and checked before use, so each failure is one line with its
documented code, never a traceback: a truncated, too deep or corrupt `--source` archive, an upstream release
lock that is too deep, too long a number, too large or endless, a hand-edited lock of the wrong shape, a
releases-API answer of the wrong shape, an engine timeout no socket holds. Through the CLI, with no engine."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest
import yaml
from local_servers import ArtifactServer, env_for
from support import no_engine, one_line, run_build_py


def left_under(project) -> list:
    build = project / "build"
    return sorted(str(p) for p in build.rglob("*") if not p.is_dir() or any(p.iterdir())) if build.exists() else []


def tgz(members: dict) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


GOOD = {f"miles/f{i}.py": os.urandom(2000) for i in range(20)}


def truncated() -> bytes:
    return tgz(GOOD)[:100]  # not even its first tar header: the first look at it (is_archive) runs out


def corrupt_crc() -> bytes:
    body = bytearray(tgz(GOOD))
    body[-8] ^= 0xFF  # gzip's trailer: CRC-32, then the length
    return bytes(body)


def deep() -> bytes:
    return tgz({"miles/" + "/".join(["a"] * 2100) + "/f.py": b"x = 1\n"})


@pytest.mark.parametrize(
    "make, needle",
    [(truncated, "not a readable tar archive"), (corrupt_crc, "CRC"), (deep, "folders deep")],
    ids=["truncated", "corrupt-crc", "2100-folders-deep"],
)
def test_a_broken_source_archive_is_one_line(project_copy, tmp_path, make, needle):
    archive = tmp_path / "src.tgz"
    archive.write_bytes(make())
    proc = run_build_py(
        "build", "--target", "miles-cpu", "--source", f"miles={archive}", cwd=project_copy, env=no_engine(tmp_path)
    )
    one_line(proc, 2, "--source", "miles=", needle)
    assert left_under(project_copy) == []


RELEASE_LOCK = {"sglang_repo": "sgl-project/sglang", "sglang_branch": "main", "sglang_commit": "a" * 40}


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),
        ('{"sglang_commit": ' + "9" * 5000 + "}", "a number of more than 30 digits"),
        (" " * (2 << 20) + "{}", "larger than 1048576 bytes"),
        ("/dev/zero", "not a regular file"),
        ('{"a": "\\ud800 \\"', "not JSON"),
    ],
    ids=["deep", "5000-digits", "2-MiB", "endless", "broken"],
)
def test_a_hostile_release_lock_is_one_line(project_copy, tmp_path, content, needle):
    path = tmp_path / "release-lock.json"
    if content == "/dev/zero":
        path = "/dev/zero"
    else:
        path.write_text(content)
    proc = run_build_py("lock", "--from-release-lock", str(path), cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "--from-release-lock", needle)


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda lock: lock.update(sources=[1]), "sources: expected a mapping"),
        (lambda lock: lock.update(artifacts="x"), "artifacts: expected a mapping"),
        (lambda lock: lock.update(sources={"megatron_lm": 1}), "sources.megatron_lm: expected a mapping"),
    ],
    ids=["sources-list", "artifacts-string", "entry-number"],
)
def test_a_lock_of_the_wrong_shape_is_one_line(project_copy, tmp_path, edit, key):
    path = project_copy / "images" / "miles-cpu.lock.json"
    lock = json.loads(path.read_text())
    edit(lock)
    path.write_text(json.dumps(lock))
    for command in (("build", "--target", "miles-cpu"), ("lock", "--check", "--family", "miles-cpu")):
        proc = run_build_py(*command, cwd=project_copy, env=no_engine(tmp_path))
        one_line(proc, 2, "images/miles-cpu.lock.json", key)


@pytest.mark.parametrize(
    "asset, needle",
    [
        ({"digest": 7}, "digest is not text"),
        ("an asset", "an asset that is not an object"),
        ({"size": "12"}, "size is not a byte count"),
        ({"name": None}, "name is not text"),
    ],
    ids=["digest-number", "asset-string", "size-string", "name-null"],
)
def test_a_releases_api_answer_of_the_wrong_shape_is_one_line(project_copy, tmp_path, asset, needle):
    a = ArtifactServer()
    try:
        a.release("o/r", "v1", {"x.bin": b"x"})
        listing_path = "/api/repos/o/r/releases/7/assets"
        (good,) = json.loads(a.routes[listing_path][1])
        bad = {**good, **asset} if isinstance(asset, dict) else asset
        a.routes[listing_path] = (200, json.dumps([bad]).encode(), 0)
        spec = project_copy / "images" / "smoke.yaml"
        data = yaml.safe_load(spec.read_text())
        data["artifacts"] = {"rel": {"release": {"repo": "o/r", "tag": "v1"}, "why": "a test"}}
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        env = env_for(a.api)
        for command in (("lock", "--family", "smoke"), ("lock", "--check", "--family", "smoke")):
            proc = run_build_py(*command, cwd=project_copy, env=env)
            one_line(proc, 3, "releases/7/assets", needle)
        assert not (project_copy / "images" / "smoke.lock.json").exists()
    finally:
        a.stop()


@pytest.mark.parametrize("value", ["9" * 20, "86401", "٣"])
def test_an_engine_timeout_no_socket_holds_is_one_line(project_copy, tmp_path, value):
    env = no_engine(tmp_path, MILES_ENGINE_TIMEOUT=value)
    proc = run_build_py("verify", "--target", "smoke", "--image", "miles:smoke", cwd=project_copy, env=env)
    one_line(proc, 2, "MILES_ENGINE_TIMEOUT=", "from 1 to 86400")
