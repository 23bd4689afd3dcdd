"""Checksum-pinned artifacts, for real: BuildKit fetches each file a step reads with `ADD --checksum` from an HTTP
server on 127.0.0.1, with the digest `build.py lock` recorded; a prebuilt wheel replaces a source build once it is
locked, `--source wheels=DIR` replaces both, a pending artifact leaves the step to its source build; a wrong
digest in the lock fails the build (exit 1, naming the artifact) and moves no tag. The family is the smoke spec of
a project copy with one tracked git component and two artifacts (its own tag, so `miles:smoke` is never touched)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile

import pytest
import yaml
from local_servers import ArtifactServer, GitServer, env_for
from support import remove_images, run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUFFIX = "artifact-test"
WHEEL = "demo_pkg-1.0-py3-none-any.whl"
PYPROJECT = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
PYPROJECT += '[project]\nname = "demo-pkg"\nversion = "1.0"\n'


def wheel(where: str) -> bytes:
    """A real (tiny, pure) wheel of demo-pkg 1.0 whose module says where it came from."""
    files = {
        "demo_pkg/__init__.py": f"WHERE = {where!r}\n".encode(),
        "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = ""
    for name, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(body)}\n"
    files["demo_pkg-1.0.dist-info/RECORD"] = (record + "demo_pkg-1.0.dist-info/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
    return out.getvalue()


def test_artifacts_are_fetched_by_digest_and_a_wrong_digest_fails_the_build(project_copy, tmp_path, docker_client):
    g, a = GitServer(tmp_path / "git"), ArtifactServer()
    tags: list = []
    try:
        url = g.create("o/demo", {"pyproject.toml": PYPROJECT, "demo_pkg/__init__.py": "WHERE = 'source'\n"})
        wheel_url = a.file(WHEEL, wheel("artifact"))
        notes_url = a.file("notes.txt", b"pinned by digest\n")
        spec = project_copy / "images" / "smoke.yaml"
        data = yaml.safe_load(spec.read_text())
        data["components"] = {"demo": {"git": url, "track": {"branch": "main"}, "why": "built when no wheel is"}}
        data["artifacts"] = {"demo_wheel": {"url": wheel_url}, "notes": {"url": notes_url}}
        # The inventory gate holds a spec to what it declares: the component's wheel sits beside the lock.
        data["wheelhouse"]["beside"]["demo-pkg"] = {"source": "demo", "why": "the demo component, built or prebuilt"}
        data["steps"] += [
            {"source": "demo", "prebuilt": "demo_wheel", "flags": ["no-deps"]},
            {"artifact": "notes", "to": "/opt/notes.txt"},
        ]
        data["variants"] = {"smoke": {"tag_suffix": SUFFIX}}
        data.pop("upstream_tags")  # its postfixes name the variants just replaced
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        env = env_for()
        assert run_build_py("lock", "--family", "smoke", cwd=project_copy, env=env).returncode == 0
        lock_path = project_copy / "images" / "smoke.lock.json"
        locked = json.loads(lock_path.read_text())

        def build(*extra):
            proc = run_build_py("build", "--target", "smoke", *extra, cwd=project_copy, env=env)
            tags.extend(w for w in proc.stdout.split() if w.startswith(f"miles:{SUFFIX}-"))
            return proc

        def where(image):
            out = docker_client.containers.run(
                image.id, ["/opt/venv/bin/python", "-c", "import demo_pkg; print(demo_pkg.WHERE)"], remove=True
            )
            return out.decode().strip()

        tags.append(f"miles:{SUFFIX}")
        proc = build()
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        image = docker_client.images.get(f"miles:{SUFFIX}")
        assert where(image) == "artifact"
        notes = docker_client.containers.run(image.id, ["cat", "/opt/notes.txt"], remove=True)
        assert notes == b"pinned by digest\n"
        assert image.labels["io.miles.source.notes"] == f"{notes_url} sha256:{hashlib.sha256(notes).hexdigest()}"
        assert image.labels["io.miles.build.demo"] == f"prebuilt wheel {WHEEL} (artifact demo_wheel)"

        wheels = tmp_path / "wheels"
        wheels.mkdir()
        (wheels / WHEEL).write_bytes(wheel("wheels folder"))
        proc = build("--source", f"wheels={wheels}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        image = docker_client.images.get(f"miles:{SUFFIX}")
        assert where(image) == "wheels folder" and image.labels["io.miles.source.wheels"].startswith("local wheels")

        pending = json.loads(lock_path.read_text())
        del pending["artifacts"]["demo_wheel"]
        lock_path.write_text(json.dumps(pending))
        proc = build()
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        image = docker_client.images.get(f"miles:{SUFFIX}")
        assert where(image) == "source"
        assert image.labels["io.miles.build.demo"].startswith("built from source (artifact demo_wheel is pending")

        before = image.id
        locked["artifacts"]["notes"]["sha256"] = "0" * 64
        lock_path.write_text(json.dumps(locked))
        proc = build()
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "artifact notes" in proc.stderr and "sha256:000000000000" in proc.stderr, proc.stderr
        assert docker_client.images.get(f"miles:{SUFFIX}").id == before
    finally:
        g.stop()
        a.stop()
        remove_images(docker_client, *dict.fromkeys(tags))
