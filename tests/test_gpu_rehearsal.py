"""The GPU rehearsal's render-to-plan half: each kernel step's plan runs exactly the RUN text the render writes.

The rehearsal (ci/gpu_rehearsal.py) is only worth its GPU time if what it runs there is the image's own step, so
these read the rendered Dockerfile independently (the RUN instruction that holds the step's package) and compare.
The run half is exercised for real on a pure-Python package: the rendered step's pip, offline, into a prefix.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from ci import gpu_rehearsal as reh
from toolkit.errors import UsageError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import bridge_version, render
from toolkit.spec.catalog import load_catalog

# A rehearsal stages its step at the path the image's RUN names (/tmp/src/<step>), one run at a time: the tests that
# run one share a worker, so one test's clean-up never meets another's run.
pytestmark = pytest.mark.xdist_group("gpu-rehearsal")

TARGET = "cu13-x86"
# selector -> a string only that step's RUN instruction holds
KERNEL_STEPS = {
    "flash-attn": "flash-attn==2.8.3",
    "flash_attention": "/tmp/src/flash_attention/hopper",
    "fast_hadamard_transform": "--no-build-isolation --no-deps /tmp/src/fast_hadamard_transform",
    "causal-conv1d": "causal-conv1d==1.6.1",
    "apex": "/tmp/src/apex",
    "miles/int4_qat": "kernels/int4_qat",
}


def rendered_runs(text: str) -> list[str]:
    """Every RUN instruction of a Dockerfile, continuation lines included."""
    runs, current = [], None
    for line in text.splitlines():
        if current is None and line.startswith("RUN "):
            current = [line]
        elif current is not None:
            current.append(line)
        if current is not None and not line.endswith("\\"):
            runs.append("\n".join(current))
            current = None
    return runs


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return render(make_plan(load_catalog().resolve(TARGET), revision="rehearsal"))


@pytest.mark.parametrize("selector", sorted(KERNEL_STEPS))
def test_plan_command_is_the_rendered_run_text(selector, dockerfile):
    (run,) = [r for r in rendered_runs(dockerfile) if KERNEL_STEPS[selector] in r]
    (step,) = reh.build_plan(TARGET, [selector])["steps"]
    assert step["instruction"] == run
    # BuildKit's view of it: continuations joined, the --mount flags taken off, the rest is the shell text
    words = run[len("RUN ") :].replace("\\\n", "").split(" ")
    flags = [w for w in words[: next(i for i, w in enumerate(words) if not w.startswith("--mount="))]]
    assert step["command"] == " ".join(words[len(flags) :]).lstrip()
    assert step["dropped_mounts"] == [f for f in flags if "type=secret" in f]
    binds = [f for f in flags if "type=bind" in f]
    expected = [
        f"--mount=type=bind,source={m['context']},target={m['target']}"
        if "context" in m
        else f"--mount=type=bind,from=src-{m['source']},target={m['target']},rw"
        for m in step["mounts"]
    ]
    assert expected == binds
    assert step["probes"] and all((reh.ROOT / "verify" / "probes" / p).is_file() for p in step["probes"])


def test_plan_carries_the_dockerfile_args_and_env_the_run_sees():
    (step,) = reh.build_plan(TARGET, ["miles/int4_qat"])["steps"]
    assert 'TORCH_CUDA_ARCH_LIST="${CUDA_ARCHS}"' in step["command"]  # resolved by the shell, from the ARG
    assert step["dockerfile_env"]["CUDA_ARCHS"] == load_catalog().resolve(TARGET).args["CUDA_ARCHS"]
    assert step["dockerfile_env"]["MAX_JOBS"] == load_catalog().resolve(TARGET).args["MAX_JOBS"] == ""
    # the step's jobs are sized where it runs (image_tools/jobs.py), from the tools/ folder of the build context
    assert "/tmp/tools/jobs.py" in step["command"]
    assert {"context": "tools", "target": "/tmp/tools"} in step["mounts"]


def test_knobs_are_explicit_and_kept_apart_from_the_step():
    plan = reh.build_plan(
        TARGET,
        ["flash_attention", "apex"],
        env=["MAX_JOBS=8"],
        step_env=["flash_attention:FLASH_ATTENTION_DISABLE_HDIM64=TRUE"],
        arch_list="9.0",
    )
    assert plan["knobs"]["env"] == {"MAX_JOBS": "8", "TORCH_CUDA_ARCH_LIST": "9.0"}
    fa3, apex = plan["steps"]
    assert fa3["env"] == {"FLASH_ATTENTION_DISABLE_HDIM64": "TRUE"} and apex["env"] == {}
    assert "DISABLE_HDIM64" not in fa3["command"]  # a knob never edits the rendered text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--step", "no-such-step"], "no step of cu13-x86 has that name"),
        (["--step", "miles"], "names 2 steps"),
        (["--step", "megatron_lm"], "not a single RUN instruction"),
        (["--step", "apex", "--arch-list", "9.0;rm -rf"], "--arch-list"),
        (["--step", "apex", "--step-env", "flash_attention:X=1"], "not a selected --step"),
        (["--step", "apex", "--env", "1X=2"], "expected NAME=VALUE"),
        (["--step", "apex"], "give --source apex=PATH"),
    ],
)
def test_bad_selections_are_one_line_exit_2(tmp_path, capsys, argv, message):
    assert reh.main(["prepare", "--target", TARGET, *argv, "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def stand_in_tree(tmp_path, package: str, init: str) -> Path:
    """A tarball of a one-package setuptools project, standing in for megatron_bridge's tree."""
    tree = tmp_path / "tree"
    (tree / package).mkdir(parents=True)
    (tree / package / "__init__.py").write_text(init)
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{package.replace("_", "-")}"\nversion = "1.0"\n'
        f'[tool.setuptools]\npackages = ["{package}"]\n'
    )
    archive = tmp_path / "tree.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="megatron-bridge-main")
    return archive


def test_run_executes_the_rendered_step_offline_into_a_prefix(tmp_path):
    """megatron_bridge's step (`pip install --no-deps --no-build-isolation /tmp/src/megatron_bridge`) over a stand-in
    tree, verbatim and for real."""
    archive = stand_in_tree(tmp_path, "rehearsal_probe_pkg", "VALUE = 41 + 1\n")
    home = tmp_path / "carry"
    source = f"megatron_bridge={archive}"
    step = "megatron_bridge"
    prepared = reh.main(["prepare", "--target", TARGET, "--step", step, "--source", source, "-o", str(home)])
    assert prepared == 0
    out = tmp_path / "out"
    rc = reh.main(["run", str(home), "--out", str(out), "--scratch", str(tmp_path / "scratch")])
    report = json.loads((out / "results.json").read_text())
    (result,) = report["results"]
    assert rc == 0, (out / "logs" / result["log"]).read_text()[-2000:]
    assert result["modules"] == ["rehearsal_probe_pkg"]
    assert result["imports"]["rehearsal_probe_pkg"]["bare"] == "ok"
    if importlib.util.find_spec("torch"):
        assert result["imports"]["rehearsal_probe_pkg"]["after_torch"] == "ok"
    site = reh.site_dir(tmp_path / "scratch" / "megatron_bridge" / "prefix")
    assert site is not None and (site / "rehearsal_probe_pkg" / "__init__.py").read_text() == "VALUE = 41 + 1\n"
    assert Path("/tmp/src/megatron_bridge/rehearsal_probe_pkg/__init__.py").exists()  # the mount's target


def test_a_run_waits_for_another_run_that_holds_its_mount(tmp_path, capsys):
    """Every run of a step stages its mount at the one path the image's RUN names: while another run holds it, a
    second run waits (and says so) instead of staging over the first, then builds."""
    archive = stand_in_tree(tmp_path, "rehearsal_wait_pkg", "")
    home, out = tmp_path / "carry", tmp_path / "out"
    prepare = ["prepare", "--target", TARGET, "--step", "megatron_bridge", "--source", f"megatron_bridge={archive}"]
    assert reh.main([*prepare, "-o", str(home)]) == 0
    (step,) = json.loads((home / reh.PLAN).read_text())["steps"]
    (mount,) = step["mounts"]
    held = reh.mount_lock(Path(mount["target"]), "another run")
    held.__enter__()
    codes: list = []
    runner = threading.Thread(
        target=lambda: codes.append(reh.main(["run", str(home), "--out", str(out), "--scratch", str(tmp_path / "s")]))
    )
    waiting = f"megatron_bridge: waiting for another rehearsal run that holds {mount['target']}"
    said = ""
    runner.start()
    try:
        # Until the run says it waits (however long a loaded machine takes to get there), or ends without waiting.
        deadline = time.monotonic() + 300
        while waiting not in said and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
            said += capsys.readouterr().out
        assert waiting in said
        assert runner.is_alive() and not (out / "results.json").exists()  # waiting, nothing staged over the holder
    finally:
        held.__exit__(None, None, None)
    runner.join(300)
    assert codes == [0] and json.loads((out / "results.json").read_text())["results"][0]["modules"] == [
        "rehearsal_wait_pkg"
    ]


def test_normalized_tar_strips_one_top_folder(tmp_path):
    (tmp_path / "top" / "sub").mkdir(parents=True)
    (tmp_path / "top" / "sub" / "f").write_text("x")
    src = tmp_path / "a.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        tar.add(tmp_path / "top", arcname="top")
    reh.normalized_tar(src, tmp_path / "b.tar.gz")
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["sub", "sub/f"]
    with pytest.raises(UsageError):
        reh.parse_pairs(["novalue"], "--env")


@pytest.mark.parametrize("probe", sorted({p for probes in reh.PROBES.values() for p in probes}))
def test_each_probe_is_a_cuda_gpu_gate_and_says_so_without_a_gpu(probe):
    """The rehearsal's probes are the CUDA family's gpu_commands; run standalone on a host without a GPU (this one),
    one says so in one line and exits 1, before it imports any extension."""
    for target in ("cu13-x86", "cu12-x86"):
        argvs = [c["argv"] for c in load_catalog().resolve(target).gates["gpu_commands"]]
        assert ["{python}", f"probes/{probe}"] in argvs, target
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the probes need torch")
    run = subprocess.run(
        [sys.executable, str(reh.ROOT / "verify" / "probes" / probe)],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        timeout=120,
    )
    assert run.returncode == 1
    assert (
        run.stdout.strip().splitlines()[-1]
        == "FAILED: no CUDA device (a kernel probe runs only where a GPU is present)"
    )


def test_a_source_archive_of_another_commit_is_refused(tmp_path, capsys):
    """A `git archive` records its commit: a tree that is not the pin would rehearse another step than the image's."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "setup.py").write_text("print('not apex')\n")
    subprocess.run([*git, "add", "setup.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    archive = tmp_path / "apex.tar.gz"
    subprocess.run([*git, "archive", "--format=tar.gz", "-o", str(archive), "HEAD"], check=True)
    assert (
        reh.archive_commit(archive)
        and reh.archive_commit(archive) != reh.load_variant(TARGET).components["apex"]["ref"]
    )
    rc = reh.main(
        ["prepare", "--target", TARGET, "--step", "apex", "--source", f"apex={archive}", "-o", str(tmp_path / "r")]
    )
    assert rc == 2
    assert "the pin is " + reh.load_variant(TARGET).components["apex"]["ref"] in capsys.readouterr().err


def _bridge_location() -> str:
    run = subprocess.run([sys.executable, "-m", "pip", "show", "sglang-attn-bridge"], capture_output=True, text=True)
    return run.stdout


def test_the_bridge_step_is_rehearsed_as_the_image_installs_it(tmp_path):
    """The bridge step's RUN, verbatim, over the checkout's bridge/ staged at its bind mount's target; its suite runs
    against the copy in the prefix (the conftest refuses anything else), and the host's own install stays."""
    before = _bridge_location()
    home = tmp_path / "carry"
    assert reh.main(["prepare", "--target", TARGET, "--step", "bridge", "-o", str(home)]) == 0
    (step,) = json.loads((home / reh.PLAN).read_text())["steps"]
    assert "pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge " in step["command"]
    assert step["command"].endswith("= 'cpython %s'" % bridge_version())  # the install proves itself
    out = tmp_path / "out"
    rc = reh.main(["run", str(home), "--out", str(out), "--scratch", str(tmp_path / "scratch")])
    (result,) = json.loads((out / "results.json").read_text())["results"]
    assert rc == 0, (out / "logs" / "bridge.suite.log").read_text()[-2000:]
    assert result["modules"] == ["sglang_attn_bridge"] and result["imports"]["sglang_attn_bridge"]["bare"] == "ok"
    (suite,) = result["probes"].values()
    assert suite["rc"] == 0
    assert _bridge_location() == before  # pip did not uninstall the host's copy to fill the prefix


def test_the_installed_mode_refuses_the_tree():
    env = dict(os.environ, SGLANG_ATTN_BRIDGE_UNDER_TEST="installed")
    suite = "bridge/tests/test_settings_and_api.py"
    argv = [sys.executable, "-m", "pytest", suite, "-p", "no:cacheprovider", "-n", "0"]
    run = subprocess.run(argv, capture_output=True, text=True, cwd=reh.ROOT, env=env, timeout=600)
    assert run.returncode == 4 and "not an installed copy" in run.stdout + run.stderr, run.stdout[-2000:]


def test_a_suite_narrowed_to_some_paths_runs_only_those_under_its_new_limit():
    suite = reh.SUITES[reh.BRIDGE]
    cut = reh.narrowed(suite, ["bridge/tests/gpu/test_grads.py", "bridge/tests/gpu/test_graphs.py"], 500)
    at = cut["argv"].index("pytest")
    assert cut["argv"][at + 1 : at + 3] == ["bridge/tests/gpu/test_grads.py", "bridge/tests/gpu/test_graphs.py"]
    assert "bridge/tests/gpu" not in cut["argv"] and cut["timeout"] == 500
    assert cut["argv"][at + 3 :] == suite["argv"][at + 2 :]  # the markers and options stay
    assert reh.narrowed(suite, [], None) == suite  # no knob, no change
