"""A real registry for push tests: Debian's `docker-registry` (distribution 2.x) on 127.0.0.1, a free port, its own
storage; started and stopped by the test that uses it. The engine treats 127.0.0.0/8 as insecure, so plain HTTP
works."""

from __future__ import annotations

import atexit
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REGISTRY_BIN = "docker-registry"
CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: 127.0.0.1:{port}
"""


@dataclass
class LocalRegistry:
    host: str  # 127.0.0.1:PORT
    proc: subprocess.Popen
    log: Path

    def get(self, path: str):
        with urllib.request.urlopen(f"http://{self.host}{path}", timeout=10) as r:
            return json.loads(r.read())

    def catalog(self) -> list:
        return self.get("/v2/_catalog")["repositories"]

    def tags(self, repository: str) -> list:
        try:
            return sorted(self.get(f"/v2/{repository}/tags/list").get("tags") or [])
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return []
            raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available() -> bool:
    return shutil.which(REGISTRY_BIN) is not None


@contextmanager
def local_registry():
    """Yield a running LocalRegistry; its process and storage are gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="miles-registry-") as tmp:
        port = free_port()
        config = Path(tmp) / "config.yml"
        config.write_text(CONFIG.format(root=Path(tmp) / "data", port=port))
        log = Path(tmp) / "registry.log"
        with open(log, "w") as logf:
            proc = subprocess.Popen([REGISTRY_BIN, "serve", str(config)], stdout=logf, stderr=subprocess.STDOUT)
        reg = LocalRegistry(host=f"127.0.0.1:{port}", proc=proc, log=log)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    reg.get("/v2/")
                    break
                except (urllib.error.URLError, ConnectionError, OSError):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"docker-registry did not start: {log.read_text()[-2000:]}") from None
                    time.sleep(0.1)
            yield reg
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_shared: list = []


def shared_registry() -> LocalRegistry:
    """One registry for the whole test process (started on first use, stopped at exit): a second push of the smoke
    image's 2 GB of layers to it is a few HEAD requests instead of a full upload. Tests that share it compare
    before/after or use their own repository namespace."""
    if not _shared:
        manager = local_registry()
        _shared.append(manager.__enter__())
        atexit.register(manager.__exit__, None, None, None)
    if _shared[0].proc.poll() is not None:
        raise RuntimeError("the shared registry died: " + _shared[0].log.read_text()[-2000:])
    return _shared[0]


class FlakyProxy:
    """A TCP proxy on 127.0.0.1 in front of `upstream` (host:port) that answers the first `fail` connections with
    `HTTP/1.1 500` (after reading their request head) and pipes every later one through byte for byte: a registry
    that fails its first calls, then works. `failed` counts the connections it failed."""

    def __init__(self, upstream: str, fail: int):
        import threading

        self.upstream, self.fail, self.failed = upstream, fail, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.host = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        import threading

        with self._lock:
            failing = self.failed < self.fail
            self.failed += failing
        if failing:
            with conn:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        host, port = self.upstream.split(":")
        up = socket.create_connection((host, int(port)))

        def pipe(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        back = threading.Thread(target=pipe, args=(up, conn), daemon=True)
        back.start()
        pipe(conn, up)
        back.join(60)
        up.close()  # both ways ended (or the other way is stuck past a minute): the sockets go with them
        conn.close()

    def close(self):
        self.sock.close()
