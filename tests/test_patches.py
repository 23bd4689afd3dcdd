"""Legitimate patches through the spec (the overlay guard): checked, applied with full context, reverse-checked.

The target tree is a real third-party tree in the smoke image (transformers in the venv), the patches are made
from the very same release installed on the host.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import transformers.utils.versions as target_module
import yaml
from support import run_build_py

TREE = "/opt/venv/lib/python3.11/site-packages/transformers"
REL = "utils/versions.py"
MARKER = "MILES_PATCHED = True"


def make_patch(old: str, new: str, context: int) -> str:
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{REL}", f"b/{REL}", n=context)
    return "".join(diff)


def insert_after_imports(text: str, line: str) -> str:
    lines = text.splitlines(True)
    idx = max(i for i, ln in enumerate(lines[:40]) if ln.startswith(("import ", "from ")))
    return "".join(lines[: idx + 1] + [f"{line}\n"] + lines[idx + 1 :])


def add_patch(project: Path, text: str) -> None:
    (project / "images" / "patches").mkdir(exist_ok=True)
    (project / "images" / "patches" / "transformers.patch").write_text(text)
    spec = project / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["patches"] = [{"file": "images/patches/transformers.patch", "tree": TREE}]
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def original() -> str:
    return Path(target_module.__file__).read_text()


def test_zero_context_patch_makes_build_refuse_with_exit_2(project_copy):
    old = original()
    add_patch(project_copy, make_patch(old, insert_after_imports(old, MARKER), context=0))
    proc = run_build_py("--target", "smoke", cwd=project_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing to build smoke" in proc.stderr and "zero-context" in proc.stderr
    assert "transformers.patch:1(" in proc.stderr  # names the hunk
    assert not (project_copy / "build").exists()


@pytest.mark.docker
def test_context_patch_lands_in_the_image(project_copy, docker_client):
    old = original()
    add_patch(project_copy, make_patch(old, insert_after_imports(old, MARKER), context=3))
    tag = "miles-patch-test:ok"
    proc = run_build_py("--target", "smoke", "--tag", tag, cwd=project_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = docker_client.containers.run(
        tag,
        ["/opt/venv/bin/python", "-c", "import transformers.utils.versions as v; print(v.MILES_PATCHED)"],
        remove=True,
        network_disabled=True,
    )
    assert out.decode().strip() == "True"
    docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_patch_against_a_drifted_tree_fails_the_build(project_copy, docker_client, smoke_image):
    before = docker_client.images.get(smoke_image).id
    # The patch was made against a file that differs from the image's copy right where the hunk sits.
    lines = original().splitlines(True)
    idx = max(i for i, ln in enumerate(lines[:40]) if ln.startswith(("import ", "from ")))
    lines[idx] = lines[idx].rstrip("\n") + "  # drifted\n"
    drifted = "".join(lines)
    add_patch(project_copy, make_patch(drifted, insert_after_imports(drifted, MARKER), context=3))
    proc = run_build_py("--target", "smoke", cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED step:" in proc.stdout and "git -C" in proc.stdout and "apply --check" in proc.stdout
    assert docker_client.images.get(smoke_image).id == before


def test_lint_cli_reports_a_zero_context_patch(project_copy):
    old = original()
    add_patch(project_copy, make_patch(old, insert_after_imports(old, MARKER), context=0))
    proc = run_build_py("lint", "images/patches", cwd=project_copy)
    assert proc.returncode == 1
    assert "zero-context" in proc.stdout and "transformers.patch" in proc.stdout


def test_lint_is_clean_on_the_project_and_runs_hadolint():
    proc = run_build_py("lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lint: 0 finding(s)" in proc.stdout
