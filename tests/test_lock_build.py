"""The default path of a build, for real: BuildKit fetches a git component as a pinned remote named context
(`<url>#<commit>` from the lock, no `--source`) from a git server on 127.0.0.1, and the image's label records that
pin; `--ref` builds another commit of the same remote for one build. The family is the smoke spec of a project
copy with one tracked component added (its own tag suffix, so the project's `miles:smoke` is never touched)."""

from __future__ import annotations

import pytest
import yaml
from local_servers import GitServer, env_for
from support import remove_images, run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUFFIX = "lock-remote-test"


def test_a_locked_remote_git_source_is_fetched_by_buildkit_and_labelled(project_copy, tmp_path, docker_client):
    g = GitServer(tmp_path / "git")
    tags = []
    try:
        url = g.create("o/demo")
        first = g.commit("o/demo", {"demo.py": "WHERE = 'first'\n"})
        spec = project_copy / "images" / "smoke.yaml"
        data = yaml.safe_load(spec.read_text())
        data["components"] = {"demo": {"git": url, "track": {"branch": "main"}, "why": "the remote path, for real"}}
        data["steps"] = data["steps"] + [{"source": "demo", "into": "/opt/demo", "install": False}]
        data["gates"]["compile"] = ["sglang_attn_bridge", "/opt/demo"]
        data["variants"] = {"smoke": {"tag_suffix": SUFFIX}}
        data.pop("upstream_tags")  # its postfixes name the variants just replaced
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        env = env_for()
        assert run_build_py("lock", "--family", "smoke", cwd=project_copy, env=env).returncode == 0
        second = g.commit("o/demo", {"demo.py": "WHERE = 'second'\n"})  # the branch moves; the lock does not

        for ref, want, where in ((None, first, "first"), (second, second, "second")):
            extra = ["--ref", f"demo={ref}"] if ref else []
            proc = run_build_py("build", "--target", "smoke", "--progress", "plain", *extra, cwd=project_copy, env=env)
            tags += [f"miles:{SUFFIX}"] + [w for w in proc.stdout.split() if w.startswith(f"miles:{SUFFIX}-")]
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            image = docker_client.images.get(f"miles:{SUFFIX}")
            assert image.labels["io.miles.source.demo"] == f"{url}#{want}"
            out = docker_client.containers.run(image.id, ["cat", "/opt/demo/demo.py"], remove=True)
            assert out.decode() == f"WHERE = '{where}'\n"
            assert "--source" not in proc.stdout and "local " not in image.labels["io.miles.source.demo"]
    finally:
        g.stop()
        remove_images(docker_client, *dict.fromkeys(tags))
