"""Hostile and careless use with the real engine, round two: a signal at any point of a build (staging, clean-up,
debootstrap) leaves nothing on the host, an engine that answers the ping and then hangs is exit 3 naming the call,
`--skip-existing` honours `--tag`, and `verify` on an image without the target's python is one line. Images and
containers made here are named `harden-...` and removed at the end."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from support import remove_images, run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _cmdline(pid: int) -> list:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _descendants(pid: int) -> list:
    """(pid, argv) of every live process below `pid`."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier}
        found += [(p, _cmdline(p)) for p in frontier]
    return found


def _start(project: Path, *args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "build.py", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(condition, proc, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"build.py ended before {what}: {out}{err}")
        time.sleep(0.02)
    proc.terminate()  # build.py stops its children and cleans up
    proc.communicate(timeout=120)
    pytest.fail(f"no {what} within {seconds}s")


def _finish(proc, seconds=120):
    try:
        return proc.communicate(timeout=seconds)
    finally:
        if proc.poll() is None:
            proc.kill()


def _probe_component(project: Path) -> None:
    """Give smoke a git component, so `--source probe=TREE` stages a tree (the template never reads it)."""
    spec = project / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["components"] = {"probe": {"git": "https://example.invalid/probe.git", "ref": "a" * 40}}
    data["steps"] = data["steps"] + [{"source": "probe", "into": "/opt/probe", "install": False}]
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def _big_tree(root: Path, files: int = 30_000) -> Path:
    for i in range(files // 500):
        d = root / f"d{i}"
        d.mkdir(parents=True)
        for j in range(500):
            (d / f"f{j}.py").write_text(f"X = {i * 500 + j}\n")
    return root


def _nothing_left(project: Path) -> list:
    return (
        sorted(p.name for p in (project / "build" / "smoke").iterdir())
        if (project / "build" / "smoke").exists()
        else []
    )


def _one_signal_line(err: str, signum) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and signal.Signals(signum).name in lines[0] and "stopped" in lines[0], lines


def test_a_signal_during_staging_leaves_nothing(project_copy, tmp_path):
    _probe_component(project_copy)
    tree = _big_tree(tmp_path / "probe")
    proc = _start(project_copy, "--target", "smoke", "--source", f"probe={tree}", "--tag", "harden-stage:1")
    build = project_copy / "build" / "smoke"
    _wait_for(lambda: build.is_dir() and any(build.glob(".sources-*")), proc, 180, "staging folder")
    os.kill(proc.pid, signal.SIGTERM)
    out, err = _finish(proc)
    assert proc.returncode == 143, out + err
    _one_signal_line(err, signal.SIGTERM)
    assert _nothing_left(project_copy) == []


def test_more_signals_during_clean_up_cannot_cut_it_short(project_copy, tmp_path, docker_client):
    _probe_component(project_copy)
    tree = _big_tree(tmp_path / "probe")
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + f"\n# clean-up test {secrets.token_hex(4)}\n")  # a real step to stop
    tag = f"harden-cleanup-{secrets.token_hex(3)}:1"
    proc = _start(project_copy, "--target", "smoke", "--source", f"probe={tree}", "--tag", tag)

    def buildx():
        return [p for p, argv in _descendants(proc.pid) if "buildx" in argv and "build" in argv]

    _wait_for(buildx, proc, 240, "docker buildx build child")
    time.sleep(1)
    os.kill(proc.pid, signal.SIGINT)
    while proc.poll() is None:  # a user hammering Ctrl-C through the stop and the clean-up
        try:
            os.kill(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    out, err = _finish(proc)
    assert proc.returncode == 130, out + err
    _one_signal_line(err, signal.SIGINT)
    assert _nothing_left(project_copy) == []
    with pytest.raises(Exception):
        docker_client.images.get(tag)


def _mounted_under(path: Path) -> bool:
    return any(f" {path}/" in line for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_a_signal_during_debootstrap_stops_it_and_removes_its_root(project_copy, docker_client):
    base = f"harden-base-{secrets.token_hex(3)}:bookworm"
    spec = project_copy / "images" / "smoke.yaml"
    spec.write_text(spec.read_text().replace("base: miles-base:bookworm-minbase-py311-git", f"base: {base}"))
    proc = _start(project_copy, "--target", "smoke", "--tag", "harden-deboot:1")

    def rootfs():
        for _, argv in _descendants(proc.pid):
            if any(a.endswith("/debootstrap") for a in argv) and "--variant=minbase" in argv:  # a shell script
                return Path([a for a in argv if a][-1])
        return None

    root = _wait_for(rootfs, proc, 120, "debootstrap child")
    deadline = time.monotonic() + 240  # the hardest moment: its second stage, with proc (and devices) mounted
    while time.monotonic() < deadline and proc.poll() is None and not _mounted_under(root):
        time.sleep(0.05)
    mounted = _mounted_under(root)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = _finish(proc, 180)
    try:
        assert mounted, "debootstrap's second stage (with its mounts) was never reached"
        assert proc.returncode == 143, out + err
        _one_signal_line(err, signal.SIGTERM)
        assert not root.exists(), sorted(p.name for p in root.iterdir())
        assert not _mounted_under(root)
        assert not any(str(root) in " ".join(argv) for _, argv in _descendants(1))  # dpkg, tar, ...: all stopped
        with pytest.raises(Exception):
            docker_client.images.get(base)
    finally:
        remove_images(docker_client, base)


class HangingEngine:
    """A real unix-socket server that answers the ping and the version query, then never answers anything."""

    def __init__(self, path: Path):
        self.path, self.requests, self.held = path, [], []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        method, target = data.split(b"\r\n", 1)[0].decode().split()[:2]
        self.requests.append(f"{method} {target}")
        if target.endswith(("/_ping", "/version")):
            body = b"OK" if target.endswith("/_ping") else b'{"ApiVersion": "1.45", "Version": "26.1.5"}'
            head = f"HTTP/1.1 200 OK\r\nApi-Version: 1.45\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            conn.sendall(head.encode() + (b"" if method == "HEAD" else body))
            conn.close()
        else:
            self.held.append(conn)  # accepted, read, never answered

    def close(self):
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def hanging_engine(tmp_path):
    engine = HangingEngine(tmp_path / "hang.sock")
    yield engine
    engine.close()


def test_an_engine_that_hangs_after_the_ping_is_exit_3_naming_the_call(hanging_engine, tmp_path):
    env = dict(os.environ, DOCKER_HOST=f"unix://{hanging_engine.path}", MILES_ENGINE_TIMEOUT="3")
    started = time.monotonic()
    proc = run_build_py("--target", "smoke", env=env, timeout=90)
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sent no answer within 3s" in lines[0], lines
    assert "`GET /info`" in lines[0], lines  # the call, named: the first after the ping asks for the image store
    assert took < 60


def test_a_build_whose_engine_hangs_is_stopped_within_the_bound(hanging_engine, tmp_path, monkeypatch):
    from toolkit.engine import docker_engine as engine
    from toolkit.engine.invocation import Invocation
    from toolkit.errors import EngineUnavailable
    from toolkit.plan.build_plan import make_plan
    from toolkit.render.context import stage
    from toolkit.render.dockerfile import render
    from toolkit.spec.catalog import load_catalog

    plan = make_plan(load_catalog().resolve("smoke"), revision="r")
    ctx = stage(plan, render(plan), build_dir=tmp_path / "build")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{hanging_engine.path}")
    monkeypatch.setenv("MILES_ENGINE_TIMEOUT", "3")
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=r"`docker buildx build` of smoke \(BuildKit started no step\)"):
        engine.build(plan, Invocation.of(plan, ctx), out=lambda line: None)
    assert time.monotonic() - started < 30
    assert not [p for p, argv in _descendants(os.getpid()) if "buildx" in argv]  # the client did not outlive it


def test_skip_existing_honours_the_tag(smoke_image, docker_client):
    tag = f"harden-skip-{secrets.token_hex(3)}:1"
    proc = run_build_py("--target", "smoke", "--tag", tag, "--skip-existing")
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "skip:" not in proc.stdout and f"{tag} does not point at it" in proc.stdout
        hash_tag = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("tagged ")][1]
        assert docker_client.images.get(tag).id == docker_client.images.get(hash_tag).id
        again = run_build_py("--target", "smoke", "--tag", tag, "--skip-existing")  # now it points there: a skip
        assert again.returncode == 0 and f"skip: {hash_tag} exists locally" in again.stdout, again.stdout
    finally:
        remove_images(docker_client, tag)


def test_verify_on_an_image_without_the_targets_python_is_one_line(docker_client, tmp_path):
    from toolkit.engine.docker_engine import import_tree

    ref = f"harden-nopy-{secrets.token_hex(3)}:1"
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "marker").write_text("no python here\n")
    import_tree(tmp_path / "img", ref)
    try:
        proc = run_build_py("verify", "--target", "smoke", "--image", ref)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert len(lines) == 1 and "cannot run /opt/venv/bin/python, the target's python" in lines[0], lines
        assert not docker_client.containers.list(all=True, filters={"ancestor": ref})  # its container removed
    finally:
        remove_images(docker_client, ref)
