"""Integration, real engine: `build.py clean` removes an image that carries the project's labels and never one that
does not. The clean is narrowed with `--target` to a target name only this test uses: a plain `clean` in the middle
of the suite would remove the smoke image, the base and wheelhouse images and the wheelhouse that the engine's other
tests (and a second worker's builds) use, so this test never runs one."""

from __future__ import annotations

import secrets

import pytest
from support import ROOT, remove_images, run_build_py

from toolkit.engine.docker_engine import image_id, import_tree
from toolkit.render.context import INPUT_HASH_LABEL, VARIANT_LABEL

pytestmark = pytest.mark.docker  # tests/conftest.py puts it in the engine's xdist group: one engine test at a time


def test_clean_removes_the_targets_labelled_image_and_never_an_unlabelled_one(docker_client, tmp_path):
    name = f"clean-test-{secrets.token_hex(4)}"  # a target no spec names: only this test's images carry it
    folder = tmp_path / "img"
    folder.mkdir()
    (folder / "marker").write_text("build.py clean test\n")
    foreign, look_alike, mine = f"{name}-foreign:1", f"{name}-alike:1", f"{name}-mine:1"
    import_tree(folder, foreign)  # no label at all
    import_tree(folder, look_alike, labels={VARIANT_LABEL: name})  # the target's name, but no build made it
    import_tree(folder, mine, labels={INPUT_HASH_LABEL: "0" * 64, VARIANT_LABEL: name})
    cache_before = sorted(p.name for p in (ROOT / ".cache").iterdir()) if (ROOT / ".cache").is_dir() else []
    try:
        assert docker_client.images.get(mine).labels[INPUT_HASH_LABEL] == "0" * 64  # import_tree's labels landed
        dry = run_build_py("clean", "--target", name, "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert f"would remove image {mine} (" in dry.stdout
        assert foreign not in dry.stdout and look_alike not in dry.stdout
        assert dry.stdout.splitlines()[-1].startswith("clean --dry-run: would remove 1 image(s) and 0 folder(s)")
        assert all(image_id(docker_client, ref) for ref in (foreign, look_alike, mine))  # nothing removed

        proc = run_build_py("clean", "--target", name)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"removed image {mine} (" in proc.stdout
        assert proc.stdout.splitlines()[-1].startswith("clean: removed 1 image(s) and 0 folder(s); freed ")
        assert image_id(docker_client, mine) is None
        assert image_id(docker_client, foreign) and image_id(docker_client, look_alike)
        after = sorted(p.name for p in (ROOT / ".cache").iterdir()) if (ROOT / ".cache").is_dir() else []
        assert after == cache_before  # --target touches no folder
    finally:
        remove_images(docker_client, foreign, look_alike, mine)
