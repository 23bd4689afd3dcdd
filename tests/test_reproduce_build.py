"""`build.py verify --reproduce` against the real engine: the smoke image changed by hand (a container's change,
committed with the image's labels) is rebuilt with --no-cache; the verdict names the layer and the file the hand
added, and says every layer the build made came back with the same files and contents (on this engine's classic
image store only their file times differ). Slow: a --no-cache rebuild of smoke, about 3 minutes."""

import pytest
from support import run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHANGED = "opt/venv/lib/python3.11/site-packages/sglang_attn_bridge/__init__.py"


def test_a_hand_changed_image_is_not_reproduced_and_the_changed_file_is_named(docker_client, smoke_image):
    container = docker_client.containers.run(
        smoke_image, ["sh", "-c", f"echo '# changed by hand' >> /{CHANGED}"], detach=True, network_disabled=True
    )
    try:
        assert container.wait()["StatusCode"] == 0
        handmade = container.commit(repository="miles-reproduce-test", tag="handmade")
    finally:
        container.remove(force=True)
    images_before = {i.id for i in docker_client.images.list(all=True)}
    try:
        proc = run_build_py("verify", "--target", "smoke", "--reproduce", "--image", "miles-reproduce-test:handmade")
        said = proc.stdout + proc.stderr
        assert proc.returncode == 1, said
        built = len(docker_client.images.get(smoke_image).attrs["RootFS"]["Layers"])
        assert f"not reproduced: layer {built + 1} differs first in content: {CHANGED} (" in said, said
        assert f"    {CHANGED}: in a layer only the image has" in said, said
        for layer in range(2, built + 1):  # every layer the build made: the same files, contents, modes, owners
            line = next(ln for ln in said.splitlines() if ln.startswith(f"  layer {layer} ("))
            assert "in content" not in line and "in time only" in line, line
        # Nothing tagged, and the rebuild removed.
        assert {i.id for i in docker_client.images.list(all=True)} - images_before == set()
    finally:
        docker_client.images.remove(handmade.id, force=True)


def test_an_image_of_other_inputs_is_refused_before_anything_builds(docker_client, smoke_image):
    proc = run_build_py("verify", "--target", "smoke", "--reproduce", "--image", smoke_image, "--set", "args.X=1")
    assert proc.returncode == 2 and "has input hash" in proc.stderr and "this tree gives" in proc.stderr, proc.stderr
    assert "built smoke" not in proc.stdout
