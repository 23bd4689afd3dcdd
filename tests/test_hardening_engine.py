"""Hostile and careless use that needs the real engine: concurrent builds never cross, the wheelhouse is prepared
atomically, the gates judge the image that gets the tag, tags move together, signals stop the BuildKit client,
and `--registry` is not prefixed onto a tag that already names one. Every image made here is tagged `harden-...`
(or is a hash tag of a value only this test uses) and removed at the end."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from support import remove_images, run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def env_of(client, ref) -> dict:
    return dict(e.split("=", 1) for e in client.images.get(ref).attrs["Config"]["Env"])


def tagged(stdout: str) -> list:
    return re.findall(r"^tagged (\S+)$", stdout, re.M)


def test_concurrent_builds_never_cross(project_copy, docker_client):
    probes = [f"p{i}-{secrets.token_hex(4)}" for i in range(3)]

    def build(i):
        return run_build_py(
            "--target", "smoke", "--set", f"env.PROBE={probes[i]}", "--tag", f"harden-conc-{i}:1", cwd=project_copy
        )

    with ThreadPoolExecutor(len(probes)) as pool:
        procs = list(pool.map(build, range(len(probes))))
    refs = [ref for proc in procs for ref in tagged(proc.stdout)]
    try:
        for i, proc in enumerate(procs):
            assert proc.returncode == 0, proc.stdout + proc.stderr
            moving, hash_tag = tagged(proc.stdout)
            assert moving == f"harden-conc-{i}:1"
            for ref in (moving, hash_tag):  # each tag holds this build's value, and only it
                assert env_of(docker_client, ref)["PROBE"] == probes[i], (ref, i)
            label = docker_client.images.get(hash_tag).labels["io.miles.input-hash"]
            assert hash_tag.endswith("-" + label[:12])
        assert len({tagged(p.stdout)[1] for p in procs}) == len(probes)
        assert not any((project_copy / "build" / "smoke").iterdir())  # every private staging folder removed
        again = run_build_py(
            "--target",
            "smoke",
            "--set",
            f"env.PROBE={probes[1]}",
            "--tag",
            "harden-conc-1:1",
            "--skip-existing",
            cwd=project_copy,
        )
        assert again.returncode == 0 and f"skip: {tagged(procs[1].stdout)[1]} exists locally" in again.stdout
    finally:
        remove_images(docker_client, *refs)


def _small_wheelhouse_spec(project: Path, pip: dict) -> None:
    """Smoke with a tiny pin set: the wheelhouse downloads exactly the constraints file's lines."""
    spec = project / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["pip"] = pip
    data["steps"] = [{"pip": list(pip)}, "patches"]  # the one step installs the tiny set
    data["wheelhouse"].pop("other_platforms", None)  # one platform: the tiny constraints file is all there is
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    (project / "images" / data["wheelhouse"]["constraints"]).write_text(
        "".join(f"{name}=={version}\n" for name, version in pip.items())
    )


def _own_cache(project: Path) -> Path:
    (project / ".cache").unlink()
    (project / ".cache").mkdir()
    return project / ".cache"


def test_failed_wheelhouse_download_leaves_no_cache_folder(project_copy, tmp_path):
    cache = _own_cache(project_copy)
    _small_wheelhouse_spec(project_copy, {"harden-no-such-dist-xyz": "1.0"})
    proc = run_build_py("bake", "--target", "smoke", "-o", str(tmp_path / "bake.json"), cwd=project_copy)
    assert proc.returncode == 1 and "wheelhouse download failed" in proc.stderr, proc.stderr
    assert list((cache / "wheelhouse").iterdir()) == []


def test_two_wheelhouse_preparations_at_once_never_show_a_half_folder(project_copy, tmp_path, docker_client):
    cache = _own_cache(project_copy)
    _small_wheelhouse_spec(project_copy, {"idna": "3.20"})
    second = tmp_path / "second"
    shutil.copytree(project_copy, second, symlinks=True, ignore=shutil.ignore_patterns(".cache"))
    (second / ".cache").symlink_to(cache)
    seen_incomplete, done = [], threading.Event()

    def watch():
        while not done.is_set():
            for d in (cache / "wheelhouse").glob("smoke-*") if (cache / "wheelhouse").is_dir() else ():
                if not (d / ".complete").exists() and d.exists():
                    seen_incomplete.append(d.name)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(2) as pool:
            procs = list(
                pool.map(
                    lambda p: run_build_py("bake", "--target", "smoke", "-o", str(p / "bake.json"), cwd=p),
                    (project_copy, second),
                )
            )
    finally:
        done.set()
        watcher.join()
    made = [
        line.split()[2]
        for p in procs
        for line in (p.stdout + p.stderr).splitlines()
        if line.startswith("wheelhouse image ")
    ]
    try:
        for proc in procs:
            assert proc.returncode == 0, proc.stderr
        assert made  # the wheelhouse image was made from the folder
        assert seen_incomplete == []
        folders = sorted(p.name for p in (cache / "wheelhouse").iterdir())
        assert len(folders) == 1 and folders[0].startswith("smoke-"), folders  # no partial download left
        assert [p.name for p in (cache / "wheelhouse" / folders[0]).glob("idna-3.20-*.whl")]
    finally:
        remove_images(docker_client, *set(made))


def test_runtime_env_is_judged_by_the_gates(project_copy, docker_client):
    """PYTHONHOME=/nonexistent breaks the image's python: the gates must see it, so the build fails untagged."""
    tag = f"harden-pyhome-{secrets.token_hex(3)}:1"
    proc = run_build_py("--target", "smoke", "--set", "env.PYTHONHOME=/nonexistent", "--tag", tag, cwd=project_copy)
    refs = tagged(proc.stdout)
    remove_images(docker_client, *refs)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED step:" in proc.stdout and "-m verify" in proc.stdout
    assert refs == []
    with pytest.raises(Exception):
        docker_client.images.get(tag)


def _tiny_image(tmp_path, ref: str) -> str:
    from toolkit.engine.docker_engine import import_tree

    folder = tmp_path / ref.replace(":", "-")
    folder.mkdir()
    (folder / "marker").write_text(ref)
    import_tree(folder, ref)
    return docker_client_id(ref)


def docker_client_id(ref: str) -> str:
    import docker

    return docker.from_env().images.get(ref).id


def test_tags_move_together_or_not_at_all(docker_client, tmp_path):
    """The CLI validates tags first (test_hardening); should the engine still refuse one, none has moved."""
    from toolkit.engine.docker_engine import tag_all
    from toolkit.errors import BuildFailed

    token = secrets.token_hex(3)
    kept, fresh = f"harden-tags-{token}:kept", f"harden-tags-{token}:fresh"
    old, new = _tiny_image(tmp_path, kept), _tiny_image(tmp_path, f"harden-tags-{token}:new")
    try:
        with pytest.raises(BuildFailed, match="no tag moved"):
            tag_all(docker_client, new, (kept, fresh, "harden-Bad Ref:1"))
        assert docker_client.images.get(kept).id == old
        with pytest.raises(Exception):
            docker_client.images.get(fresh)
        tag_all(docker_client, new, (kept, fresh))
        assert docker_client.images.get(kept).id == docker_client.images.get(fresh).id == new
    finally:
        remove_images(docker_client, kept, fresh, f"harden-tags-{token}:new")


def test_registry_is_not_prefixed_onto_a_tag_that_names_one(project_copy, docker_client):
    proc = run_build_py(
        "--target",
        "smoke",
        "--tag",
        "localhost:5999/harden/x:1",
        "--registry",
        "localhost:5999/harden",
        cwd=project_copy,
    )
    refs = tagged(proc.stdout)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert refs[0] == "localhost:5999/harden/x:1"
        assert refs[1].startswith("localhost:5999/harden/miles:smoke-")
        assert docker_client.images.get(refs[0]).id == docker_client.images.get(refs[1]).id
    finally:
        remove_images(docker_client, *refs)


def _children(pid: int) -> list:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append((int(stat.parent.name), cmdline))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_buildx_cleans_up_and_says_so(project_copy, docker_client, signum):
    tag = f"harden-sig-{secrets.token_hex(3)}:1"
    # A bridge edit makes the build run real steps (not all cached) while the signal arrives.
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + f"\n# signal test {secrets.token_hex(4)}\n")
    proc = subprocess.Popen(
        [sys.executable, "build.py", "--target", "smoke", "--tag", tag],
        cwd=project_copy,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline, buildx = time.monotonic() + 120, []
        while not buildx and time.monotonic() < deadline and proc.poll() is None:
            buildx = [pid for pid, cmd in _children(proc.pid) if "buildx" in cmd and " build " in cmd]
            time.sleep(0.1)
        assert buildx, "no docker buildx build child appeared"
        time.sleep(1)  # inside the build now
        os.kill(proc.pid, signum)  # build.py alone, as a supervisor or a CI runner would
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and signal.Signals(signum).name in lines[0] and "stopped" in lines[0], lines
    assert not _alive(buildx[0])  # the BuildKit client did not outlive build.py
    assert not any((project_copy / "build" / "smoke").iterdir())  # its private staging folder is gone
    with pytest.raises(Exception):
        docker_client.images.get(tag)
