"""Every spec patch whose target tree is in the upstream snapshots applies to the pinned tree, the way the build
applies it: `git apply --check`, `git apply`, then `git apply --reverse --check` proves the result. The trees are
found by commit: miles (a component patch on `miles`) and Megatron-LM (a patch on /root/Megatron-LM)."""

from __future__ import annotations

import tarfile

import pytest
from support import ROOT, git, snapshot_of

from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
# A patch's tree in the image -> the component whose pinned tree it is.
TREES = {"/root/miles": "miles", "/root/Megatron-LM": "megatron_lm"}
CASES = sorted(
    {
        (p["file"], TREES[p["tree"]], v.components[TREES[p["tree"]]]["ref"], p.get("strip", 1))
        for v in CATALOG.variants.values()
        for p in v.patches
        if p.get("tree") in TREES
    }
)


def unpack(commit: str, dest):
    path = snapshot_of(commit)
    if path is None:
        pytest.skip(f"no snapshot of {commit} beside the checkout")
    with tarfile.open(path) as tar:
        tar.extractall(dest, filter="data")
    (top,) = list(dest.iterdir())
    return top


@pytest.mark.parametrize("patch, component, commit, strip", CASES, ids=[c[0].rsplit("/", 1)[-1] for c in CASES])
def test_the_patch_applies_to_the_pinned_tree(tmp_path, patch, component, commit, strip):
    tree = unpack(commit, tmp_path / component)
    git(tree, "init", "-q")  # the build applies with `git -C TREE apply`; a tree without .git works the same
    path = str(ROOT / patch)
    for args in (["--check"], [], ["--reverse", "--check"]):
        run = git(tree, "apply", *args, f"-p{strip}", path, check=False)
        assert run.returncode == 0, f"git apply {' '.join(args)} {patch} on {component}@{commit[:9]}: {run.stderr}"


def test_the_check_fails_on_a_tree_the_patch_does_not_fit(tmp_path):
    miles = [c for c in CASES if c[1] == "miles"][0]
    tree = unpack(miles[2], tmp_path / "miles")
    patch = (ROOT / miles[0]).read_text()
    target = next(line[len("+++ b/") :] for line in patch.splitlines() if line.startswith("+++ b/"))
    path = tree / target
    path.write_text("".join(line.replace("    ", "\t") for line in path.read_text().splitlines(True)))  # drifted
    git(tree, "init", "-q")
    run = git(tree, "apply", "--check", str(ROOT / miles[0]), check=False)
    assert run.returncode != 0 and "patch does not apply" in run.stderr
