"""Which targets a change rebuilds, decided by the input hash at two revisions of a real git repository (a copy of
the project), never by path globs: a README/tests-only commit rebuilds nothing, a bridge commit every target, a
commit to images/rocm.yaml only the ROCm targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from support import ROOT, run_build_py
from support import git as run_git

from toolkit.spec.catalog import load_catalog

SCRIPT = ROOT / "ci" / "changed_images.py"
ALL = sorted(load_catalog().variants)
ROCM = sorted(n for n, v in load_catalog().variants.items() if v.family == "rocm")


def git(repo, *args):
    run = run_git(repo, *args, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def commit(repo, message):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def changed(repo, base, head="HEAD", env=None):
    out = repo.parent / "changed.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo), "--base", base, "--head", head, "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


@pytest.fixture
def repo(project_copy):
    """The project copy as a git repository with one commit (README and tests/ included, caches ignored)."""
    (project_copy / "README.md").write_text("# miles images\n")
    (project_copy / "tests").mkdir()
    (project_copy / "tests" / "test_example.py").write_text("def test_ok():\n    assert True\n")
    (project_copy / "bridge" / "tests").mkdir()
    (project_copy / "bridge" / "tests" / "test_bridge.py").write_text("def test_ok():\n    assert True\n")
    (project_copy / ".gitignore").write_text(".cache\n/build/\n__pycache__/\n")
    git(project_copy, "init", "-q", "-b", "main")
    commit(project_copy, "initial")
    return project_copy


def test_readme_and_tests_only_change_rebuilds_nothing(repo):
    base = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("# miles images\n\nMore words.\n")
    (repo / "tests" / "test_example.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    (repo / "toolkit" / "engine" / "docker_engine.py").write_text(
        (repo / "toolkit" / "engine" / "docker_engine.py").read_text() + "\n# a comment\n"
    )
    # Under bridge/, but not shipped to any image (the staged context leaves the bridge's tests out):
    # a path glob like `bridge/**` would rebuild everything here; the input hash rebuilds nothing.
    (repo / "bridge" / "tests" / "test_bridge.py").write_text("def test_ok():\n    assert 2 > 1\n")
    commit(repo, "docs, tests, bridge tests and a toolkit comment")
    result, stdout = changed(repo, base)
    assert result["changed"] == []
    assert set(result["status"].values()) == {"same"}
    assert set(result["status"]) == set(ALL)
    assert result["hashes"]["base"] == result["hashes"]["head"]
    assert f"0 of {len(ALL)} target(s) changed" in stdout


def test_bridge_change_changes_every_target(repo):
    base = git(repo, "rev-parse", "HEAD")
    init = repo / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + "\n# a bridge change\n")
    commit(repo, "bridge")
    result, _ = changed(repo, base)
    assert result["changed"] == ALL
    assert all(result["hashes"]["base"][n] != result["hashes"]["head"][n] for n in ALL)


def test_rocm_spec_change_changes_only_rocm_targets(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD")
    spec = repo / "images" / "rocm.yaml"
    data = yaml.safe_load(spec.read_text())
    data["env"]["NCCL_MIN_NCHANNELS"] = "64"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    head = commit(repo, "rocm env")
    github_output = tmp_path / "github_output"
    result, stdout = changed(repo, base, env=dict(os.environ, GITHUB_OUTPUT=str(github_output)))
    assert ROCM and result["changed"] == ROCM
    assert all(result["status"][n] == "same" for n in ALL if n not in ROCM)
    assert result["head"] == head and result["base"] == base
    outputs = dict(line.split("=", 1) for line in github_output.read_text().splitlines())
    assert outputs == {"changed": " ".join(ROCM), "changed_json": json.dumps(ROCM), "any": "true"}
    assert "changed  rocm720-mi35x" in stdout and "same     smoke" in stdout

    # One variant's own override changes that variant only; the merge base is what counts for a branch.
    git(repo, "checkout", "-q", "-b", "topic")
    data["variants"]["rocm700-mi30x"].setdefault("args", {})["MAX_JOBS"] = "16"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    commit(repo, "mi30x jobs")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("# main moved on\n")
    commit(repo, "main moves")
    result, _ = changed(repo, "main", "topic")
    assert result["base"] == head and result["changed"] == ["rocm700-mi30x"]


def test_added_target_counts_as_changed_and_an_unhashable_base_changes_all(repo):
    base = git(repo, "rev-parse", "HEAD")
    spec = repo / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["variants"]["smoke-two"] = {"tag_suffix": "smoke-two"}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    commit(repo, "second smoke variant")
    result, _ = changed(repo, base)
    assert result["status"]["smoke-two"] == "added" and result["changed"] == ["smoke-two"]

    # A base revision whose toolkit cannot hash (here: no toolkit at all) is no reason to skip builds.
    git(repo, "checkout", "-q", "--orphan", "empty")
    git(repo, "rm", "-rq", "--cached", ".")
    (repo / "only.txt").write_text("x\n")
    git(repo, "add", "only.txt")
    git(repo, "commit", "-q", "-m", "unrelated root")
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", "empty")
    result, stdout = changed(repo, "empty")
    assert "cannot be hashed" in stdout
    assert result["changed"] == sorted(ALL + ["smoke-two"])


@pytest.mark.docker
def test_hash_equals_the_build_input_hash(repo, tmp_path):
    """The decision is made with the build's own hash: the bake file's input-hash label agrees (smoke included:
    its wheelhouse enters through the recipe-named image in the Dockerfile)."""
    result, _ = changed(repo, "HEAD")
    out = tmp_path / "bake.json"
    targets = ("--target", "rocm", "--target", "cu13", "--target", "smoke")  # cu13's arm64 kernels: emulated here
    proc = run_build_py("bake", *targets, "--allow-emulation", "-o", str(out), cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    targets = json.loads(out.read_text())["target"]
    for name in ("rocm720-mi35x", "cu13", "smoke"):
        assert targets[name]["labels"]["io.miles.input-hash"] == result["hashes"]["head"][name]


def test_bad_usage_and_unknown_revision(repo):
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 2
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo), "--base", "no-such-rev"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "no-such-rev" in proc.stderr
