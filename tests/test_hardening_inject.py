"""No value becomes Dockerfile text, proven with real builds: an artifact URL whose path decodes to a line break
(or to `..`), a lock that names another URL than its spec, and a `--source wheels` file whose name holds a line
break are each refused with exit 2 and one line naming the file and key, before anything runs: the artifact server
is never asked, no `build/` folder is made, and the tag a good build of the same spec moved stays where it was.

The family is the smoke spec of a project copy with one tracked git component, a prebuilt wheel artifact and a file
artifact (tests/test_artifact_build.py's), tagged apart so `miles:smoke` is never touched."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from local_servers import ArtifactServer, GitServer, env_for
from support import one_line, remove_images, run_build_py, wheel_bytes

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUFFIX = "inject-test"
WHEEL = "demo_pkg-1.0-py3-none-any.whl"
PYPROJECT = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
PYPROJECT += '[project]\nname = "demo-pkg"\nversion = "1.0"\n'
INJECTED = "x.bin%0aFROM%20busybox%20AS%20pwn%0aRUN%20echo%20INJECTED%20%3E%20%2Finjected%20%23"
WHEEL_INJECTED = "demo_pkg-1.0-py3-none-any\nUSER nobody\nRUN echo PWNED\nX.whl"


def test_urls_and_wheel_names_never_become_dockerfile_text(project_copy, tmp_path, docker_client):
    g, a = GitServer(tmp_path / "git"), ArtifactServer()
    tags = [f"miles:{SUFFIX}"]
    try:
        url = g.create("o/demo", {"pyproject.toml": PYPROJECT, "demo_pkg/__init__.py": "WHERE = 'source'\n"})
        wheel_url = a.file(WHEEL, wheel_bytes("demo-pkg", "1.0", "artifact"))
        body = b"pinned by digest\n"
        notes_url = a.file("notes.bin", body)
        evil_url = a.file(INJECTED, body)
        spec = project_copy / "images" / "smoke.yaml"
        lock_path = project_copy / "images" / "smoke.lock.json"
        data = yaml.safe_load(spec.read_text())
        data["components"] = {"demo": {"git": url, "track": {"branch": "main"}, "why": "built when no wheel is"}}
        data["artifacts"] = {"demo_wheel": {"url": wheel_url}, "notes": {"url": notes_url}}
        # The inventory gate holds a spec to what it declares: the component's wheel sits beside the lock.
        data["wheelhouse"]["beside"]["demo-pkg"] = {"source": "demo", "why": "the demo component, built or prebuilt"}
        data["steps"] += [
            {"source": "demo", "prebuilt": "demo_wheel", "flags": ["no-deps"]},
            {"artifact": "notes", "to": "/opt/notes.bin"},
        ]
        data["variants"] = {"smoke": {"tag_suffix": SUFFIX}}
        data.pop("upstream_tags")
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        env = env_for()
        assert run_build_py("lock", "--family", "smoke", cwd=project_copy, env=env).returncode == 0
        clean_spec, clean_lock = spec.read_text(), lock_path.read_text()

        def build(*extra):
            proc = run_build_py("build", "--target", "smoke", *extra, cwd=project_copy, env=env)
            tags.extend(w for w in proc.stdout.split() if w.startswith(f"miles:{SUFFIX}-"))
            return proc

        proc = build()
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        before = docker_client.images.get(f"miles:{SUFFIX}").id
        staged = sorted(p.name for p in (project_copy / "build").glob("*/*"))

        def refused(*words, args=(), command=("build", "--target", "smoke")):
            hits = len(a.hits)
            proc = run_build_py(*command, *args, cwd=project_copy, env=env)
            one_line(proc, 2, *words)
            assert a.hits[hits:] == [], a.hits[hits:]  # nothing was fetched: refused before anything ran
            assert sorted(p.name for p in (project_copy / "build").glob("*/*")) == staged
            assert docker_client.images.get(f"miles:{SUFFIX}").id == before

        # The spec's URL: judged after decoding (a line break, a `/..`, an empty or `..` file name), with a lock that
        # holds it as a `lock` run would have recorded it.
        for bad in (evil_url, f"{a.url}/files/a%2F..%2F..%2Fnotes.bin", f"{a.url}/", f"{a.url}/files/.."):
            data["artifacts"]["notes"]["url"] = bad
            spec.write_text(yaml.safe_dump(data, sort_keys=False))
            recorded = json.loads(clean_lock)
            recorded["artifacts"]["notes"].update(policy={"url": bad}, url=bad)
            lock_path.write_text(json.dumps(recorded))
            refused("images/smoke.yaml", "artifacts.notes.url")
            refused("images/smoke.yaml", "artifacts.notes.url", command=("lock", "--family", "smoke"))
            refused("images/smoke.yaml", "artifacts.notes.url", command=("bake", "--target", "smoke", "-o", "b.json"))
        spec.write_text(clean_spec)
        lock_path.write_text(clean_lock)

        # The lock alone: a URL other than the spec's (the injected one, with the right digest; or a clean other).
        locked = json.loads(clean_lock)
        assert locked["artifacts"]["notes"]["sha256"] == hashlib.sha256(body).hexdigest()
        for other in (evil_url, a.file("other.bin", body)):
            locked["artifacts"]["notes"]["url"] = other
            lock_path.write_text(json.dumps(locked))
            refused("smoke.lock.json", "artifacts.notes.url")
            refused("smoke.lock.json", "artifacts.notes.url", command=("lock", "--check", "--family", "smoke"))
        lock_path.write_text(clean_lock)

        # A `--source wheels` file whose name holds line breaks (packaging parses it as a wheel's).
        wheels = tmp_path / "wheels"
        wheels.mkdir()
        (wheels / WHEEL_INJECTED).write_bytes(wheel_bytes("demo-pkg", "1.0", "wheels folder"))
        refused("--source wheels", "not a plain file name", args=("--source", f"wheels={wheels}"))
        bake = ("bake", "--target", "smoke", "-o", "b.json", "--source", f"wheels={wheels}")
        refused("--source wheels", "not a plain file name", command=bake)
        assert not (project_copy / "b.json").exists()
    finally:
        g.stop()
        a.stop()
        remove_images(docker_client, *dict.fromkeys(tags))
