"""A second Docker engine on this machine for the fleet tier: engine B, beside the engine every other test uses.

Engine B has its own everything: data root, exec root (so its own managed containerd), API socket, pid file, and a
network bridge of its own created first, with iptables, masquerading and forwarding left alone, so engine A's
`docker0` and its NAT rules are never touched. It uses the containerd image store (multi-platform images, cache
export). Its builds need no network: base images and wheels come from the registry through the daemon.

A docker context names it (in a DOCKER_CONFIG of the fleet's own), so `build.py --builder CONTEXT` and `docker
buildx --builder CONTEXT` reach it. stop() kills it by its pid and removes its bridge and folders, whatever state
it is in; it is safe to call twice, and start() again brings it back on the same data.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

CONTEXT = "fleet-b"


def _unused_subnet() -> str:
    used = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for third in range(200, 255):
        if f"10.231.{third}." not in used:
            return f"10.231.{third}"
    raise RuntimeError("no free 10.231.x.0/24 for engine B's bridge")


class SecondEngine:
    def __init__(self, root: Path | None = None, letter: str = "b"):
        """`letter` names its bridge (`f<letter><pid>`): a third engine beside B needs one of its own."""
        self.root = Path(root or tempfile.mkdtemp(prefix="fleetb-", dir="/tmp"))  # short: a socket is <108
        self.sock = self.root / "docker.sock"
        self.config_dir = self.root / "docker-config"  # DOCKER_CONFIG of the fleet: contexts and buildx state
        self.bridge = f"f{letter}{os.getpid() % 100000}"
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "dockerd.log"

    @property
    def host(self) -> str:
        return f"unix://{self.sock}"

    def env(self, base: dict | None = None) -> dict:
        """The environment a command needs to see the fleet's context (engine A stays DOCKER_HOST's)."""
        return dict(base or os.environ, DOCKER_CONFIG=str(self.config_dir))

    def start(self, timeout: float = 60) -> SecondEngine:
        subnet = _unused_subnet()
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode != 0:
            subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", f"{subnet}.1/24", "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        config = {
            "bridge": self.bridge,
            "iptables": False,
            "ip-masq": False,
            "ip-forward": False,
            "features": {"containerd-snapshotter": True},
        }
        (self.root / "daemon.json").write_text(json.dumps(config))
        cmd = [
            "dockerd",
            "--config-file", str(self.root / "daemon.json"),
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "docker.pid"),
            "-H", self.host,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while self._answers() is False:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"engine B did not start:\n{tail}")
            time.sleep(0.5)
        self.config_dir.mkdir(exist_ok=True)
        ctx = ["docker", "context"]
        subprocess.run(ctx + ["rm", "-f", CONTEXT], env=self.env(), capture_output=True)
        subprocess.run(ctx + ["create", CONTEXT, "--docker", f"host={self.host}"], env=self.env(), check=True,
                       capture_output=True)  # fmt: skip
        return self

    def _answers(self) -> bool:
        run = subprocess.run(
            ["docker", "-H", self.host, "version", "--format", "{{.Server.Version}}"], capture_output=True
        )
        return run.returncode == 0

    def kill(self) -> None:
        """Stop the engine now, as a crashed host would: SIGKILL to dockerd's group, then to every process of its
        own (its containerd runs in a session of its own, build steps in runc's)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._kill_leftovers()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self._unmount()

    def _kill_leftovers(self) -> None:
        """Every process whose command line names this engine's folders (containerd, shims, runc), by pid."""
        mine = str(self.root)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if mine in cmdline:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        """stop(), then take away the bridge and every folder."""
        self.stop()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _unmount(self) -> None:
        """Mounts a killed daemon left under its folders (overlay snapshots, netns files)."""
        with open("/proc/self/mounts") as f:
            points = [line.split()[1] for line in f if line.split()[1].startswith(str(self.root))]
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
