"""Integration, real engine: the miles-cpu image from upstream's real miles and Megatron-LM sources (the snapshots
beside the repo), its gates run again on the built image, upstream's own `tests/fast/backends` run in it, and
upstream's incident reproduced on a real miles tree: a zero-context hunk placed by line number after the file
drifted must fail the build naming the file and line, tag unmoved."""

from __future__ import annotations

import re
import tarfile

import pytest
from support import MEGATRON_COMMIT, MEGATRON_SNAPSHOT, MILES_COMMIT, ROOT, SNAPSHOT, git, run_build_py

from ci import miles_fast_tests

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMMIT = MILES_COMMIT
IMAGE = "miles:miles-cpu"
ACTOR = "miles/backends/fsdp_utils/actor.py"
MEGATRON = ("--source", f"megatron_lm={MEGATRON_SNAPSHOT}")


@pytest.fixture(scope="session")
def miles_cpu_image(docker_client):
    if not SNAPSHOT.exists() or not MEGATRON_SNAPSHOT.exists():
        pytest.skip("the upstream miles or Megatron-LM snapshot (shared/upstream) is not beside the repo")
    proc = run_build_py("build", "--target", "miles-cpu", "--source", f"miles={SNAPSHOT}", *MEGATRON)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return IMAGE


def test_the_image_runs_upstream_miles_wired_to_the_bridge(docker_client, miles_cpu_image):
    labels = docker_client.images.get(miles_cpu_image).labels
    assert f"archive of commit {COMMIT}" in labels["io.miles.source.miles"]
    assert f"archive of commit {MEGATRON_COMMIT}" in labels["io.miles.source.megatron_lm"]
    code = (
        "import inspect, miles, sglang_attn_bridge; "
        "from miles.backends.fsdp_utils.actor import FSDPTrainRayActor as A; "
        "print(miles.__file__); print(sglang_attn_bridge.__file__); "
        "print(inspect.getsource(A._build_model_with_attn_bridge))"
    )
    out = docker_client.containers.run(
        miles_cpu_image, ["/opt/venv/bin/python", "-c", code], remove=True, network_disabled=True
    ).decode()
    assert "/root/miles/miles/__init__.py" in out  # editable: the source tree kept in the image
    assert "/opt/venv/lib/python3.11/site-packages/sglang_attn_bridge/" in out
    assert "from sglang_attn_bridge import build_model_with_attn_bridge" in out
    assert "apply_sglang_triton_attention_patch" not in out


def test_verify_reruns_every_miles_gate_on_the_built_image(miles_cpu_image, tmp_path):
    report = tmp_path / "report.json"
    proc = run_build_py("verify", "--target", "miles-cpu", "--image", miles_cpu_image, "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "miles-actor-trains-through-bridge" in proc.stdout and "miles-bridge-tests" in proc.stdout
    assert "3 passed" in proc.stdout  # upstream's own bridge tests, unchanged


def corrupt_like_upstream(tree):
    """Upstream's incident on a real tree: a hunk written with zero context against actor.py, the file drifted
    (lines added above), then `git apply --unidiff-zero` in a clone without the pre-image: exit 0, wrong place."""
    path = tree / ACTOR
    lines = path.read_text().splitlines(True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("    def sleep("))
    added = ["    def offload_ready(self) -> bool:\n", "        return True\n", "\n"]
    patch = tree.parent / "zero-context.patch"
    patch.write_text(
        f"--- a/{ACTOR}\n+++ b/{ACTOR}\n@@ -{at},0 +{at + 1},{len(added)} @@\n" + "".join("+" + ln for ln in added)
    )
    first_import = next(i for i, ln in enumerate(lines) if ln.startswith("import "))
    lines[first_import:first_import] = [f"import os as _drift{i}\n" for i in range(5)]
    path.write_text("".join(lines))
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "drifted")
    applied = git(tree, "apply", "--unidiff-zero", str(patch), check=False)
    assert applied.returncode == 0, applied.stderr  # git reports success: that is the incident
    # Where the misplaced line sits in the image, once the spec's bridge patch (it removes lines above) applied.
    bridge_patch = ROOT / "images" / "patches" / "miles-attn-bridge.patch"
    git(tree, "apply", str(bridge_patch))
    landed = path.read_text().splitlines()
    git(tree, "apply", "--reverse", str(bridge_patch))
    return landed.index("    def offload_ready(self) -> bool:") + 1


def test_a_tree_corrupted_like_upstreams_fails_the_build_naming_actor_py_and_its_line(
    tmp_path, docker_client, miles_cpu_image
):
    with tarfile.open(SNAPSHOT) as tar:
        tar.extractall(tmp_path, filter="data")
    tree = tmp_path / "miles"
    line = corrupt_like_upstream(tree)
    before = docker_client.images.get(miles_cpu_image).id
    proc = run_build_py("build", "--target", "miles-cpu", "--source", f"miles={tree}", *MEGATRON)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = [ln for ln in proc.stdout.splitlines() if "FAIL" in ln and "actor.py" in ln]
    assert any(f"{ACTOR}:{line}: IndentationError" in ln for ln in fails), proc.stdout
    assert docker_client.images.get(miles_cpu_image).id == before
    # Only what follows the miles source can rerun: the venv and the dependency layers came from the cache.
    steps = {}  # step number -> its progress line (BuildKit reports steps as they finish, not in order)
    for ln in proc.stdout.splitlines():
        m = re.match(r"\s*\[stage-0\s+(\d+)/\d+\] (.*)", ln)
        if m:
            steps[int(m.group(1))] = m.group(2).strip()
    copy = next(n for n, ln in steps.items() if ln.startswith("COPY --from=src-miles"))
    before_copy = [ln for n, ln in steps.items() if 1 < n < copy]
    assert len(before_copy) >= 3 and all(ln.endswith("cached") for ln in before_copy), proc.stdout


def test_upstreams_fast_backend_tests_pass_in_the_image(docker_client, miles_cpu_image):
    """Upstream's `tests/fast/backends` (FSDP, Megatron, sglang utils), unchanged, in the image with no network:
    everything collects, and every test passes or fails as the reasoned list of tests/miles_fast_expected.json says
    (with its exception); a listed test that passes must leave the list."""
    run = miles_fast_tests.run_in_image(docker_client, miles_cpu_image, ["tests/fast/backends"])
    assert run.counts()["passed"] > 400, run.log_tail  # the suite ran, not a stray subset
    assert not run.of("collection"), [f"{c.id}: {c.reason}" for c in run.of("collection")]
    problems = miles_fast_tests.judge(run, miles_fast_tests.expected_for("tests/fast/backends"))
    assert not problems, "\n".join(problems)
