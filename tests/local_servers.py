"""Real servers on 127.0.0.1 for the lock tests: bare git repositories over HTTP, and artifact files plus a
GitHub-releases-API-shaped JSON. No mock: git, urllib and BuildKit talk to them over TCP like to any remote.

Git is served as dumb HTTP: a bare repository after `git update-server-info` is a folder of static files, which
`git ls-remote`, `git fetch` and BuildKit's git source all read. The file server answers from a table of routes,
so a test can make it serve a truncated body or a 404 on purpose.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import posixpath
import threading
import urllib.parse
import zipfile
from pathlib import Path

from support import git


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, head: bool):
        path = urllib.parse.urlsplit(self.path).path
        self.server.hits.append(path)
        route = self.server.routes.get(path)
        if route is None and self.server.root is not None:
            rel = posixpath.normpath(urllib.parse.unquote(path)).lstrip("/")
            f = self.server.root / rel
            if rel and not rel.startswith("..") and f.is_file():
                route = (200, f.read_bytes(), 0)
        status, body, missing = route if route is not None else (404, b"not found\n", 0)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body) + missing))
        html = path.endswith("/") and body.lstrip().startswith(b"<!DOCTYPE html>")  # an index page (PEP 503)
        self.send_header("Content-Type", "text/html" if html else "application/octet-stream")
        if missing:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(body)
        if missing:  # announce more than is sent, then hang up: a truncated download
            self.close_connection = True

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)


class Server:
    """A threading HTTP server on 127.0.0.1 (a free port) serving `root` and `routes` {path: (status, body,
    missing bytes)}; `hits` lists every path asked for, in order; stop() closes it."""

    def __init__(self, root: Path | None = None):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.root, self.httpd.routes, self.httpd.hits = root, {}, []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def routes(self) -> dict:
        return self.httpd.routes

    @property
    def hits(self) -> list:
        return self.httpd.hits

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class GitServer(Server):
    """Bare repositories under `root/<owner>/<name>.git`, each with a work tree beside it to commit from."""

    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root)
        self.root = root

    def create(self, repo: str, files: dict | None = None, branch: str = "main") -> str:
        """A new repository `owner/name` with one commit of `files` on `branch`; its clone URL."""
        work = self.root.parent / "work" / repo
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", branch)
        bare = self.root / f"{repo}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        git(bare.parent, "init", "-q", "--bare", bare.name)
        git(work, "remote", "add", "origin", str(bare))
        self.commit(repo, files or {"README": "one\n"}, branch=branch)
        return self.clone_url(repo)

    def clone_url(self, repo: str) -> str:
        return f"{self.url}/{repo}.git"

    def commit(self, repo: str, files: dict, branch: str = "main", tag: str | None = None) -> str:
        """Commit `files` on `branch` (optionally an annotated tag on it), push, refresh the dumb-HTTP index."""
        work = self.root.parent / "work" / repo
        for name, text in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"change {sorted(files)}")
        git(work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        if tag:
            git(work, "tag", "-a", "-m", tag, tag)
            git(work, "push", "-q", "-f", "origin", f"refs/tags/{tag}")
        git(self.root / f"{repo}.git", "update-server-info")
        return git(work, "rev-parse", "HEAD").stdout.strip()


class ArtifactServer(Server):
    """Files at `/files/<name>` and the releases API at `/api/repos/<repo>/releases/...` (GITHUB_API_URL=api)."""

    def __init__(self):
        super().__init__(None)
        self.releases = {}

    @property
    def api(self) -> str:
        return f"{self.url}/api"

    def file(self, name: str, body: bytes, status: int = 200, missing: int = 0) -> str:
        self.routes[f"/files/{name}"] = (status, body, missing)
        return f"{self.url}/files/{name}"

    def release(self, repo: str, tag: str, assets: dict, digests: dict | None = None, rid: int = 7) -> None:
        """Publish release `tag` of `repo` with `assets` {name: bytes} (each also served as a file); `digests`
        {name: "sha256:..."} is what the API declares for an asset, when it declares one."""
        listing = []
        for i, (name, body) in enumerate(sorted(assets.items())):
            url = self.file(f"{tag}/{name}", body)
            entry = {"id": rid * 100 + i, "name": name, "size": len(body), "browser_download_url": url}
            entry["updated_at"] = f"2026-12-01T00:00:{i:02d}Z"
            if digests and name in digests:
                entry["digest"] = digests[name]
            listing.append(entry)
        base = f"/api/repos/{repo}/releases"
        self.routes[f"{base}/tags/{tag}"] = (200, json.dumps({"id": rid, "tag_name": tag}).encode(), 0)
        self.routes[f"{base}/{rid}/assets"] = (200, json.dumps(listing).encode(), 0)


def env_for(api: str | None = None) -> dict:
    """The environment `build.py lock` runs in under test: no proxy for 127.0.0.1, the API at a local server."""
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    if api:
        env["GITHUB_API_URL"] = api
    env.pop("GITHUB_TOKEN", None)
    return env


def wheel_file(name: str, version: str, tag: str, requires=()) -> tuple[str, bytes]:
    """A real wheel file (a zip with its METADATA)."""
    dist = name.replace("-", "_")
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", meta)
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
        zf.writestr(f"{dist}/__init__.py", "")
    return f"{dist}-{version}-{tag}.whl", buf.getvalue()


class LocalIndex:
    """A PEP 503 index: one page per project, files served beside it."""

    def __init__(self):
        self.server = Server()
        self.projects: dict = {}

    def add(self, project: str, filename: str, body: bytes, yanked: str | None = None):
        digest = hashlib.sha256(body).hexdigest()
        self.server.routes[f"/files/{filename}"] = (200, body, 0)
        attr = f' data-yanked="{yanked}"' if yanked is not None else ""
        self.projects.setdefault(project, []).append(
            f'<a href="/files/{filename}#sha256={digest}"{attr}>{filename}</a>'
        )
        page = "<!DOCTYPE html><html><body>" + "".join(self.projects[project]) + "</body></html>"
        self.server.routes[f"/simple/{project}/"] = (200, page.encode(), 0)

    @property
    def url(self) -> str:
        return self.server.url + "/simple"
