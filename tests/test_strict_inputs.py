"""Every input is read strictly and no command ends in a traceback: odd environment values, an option given twice,
a GPU requirement a build cannot meet, unvalidated `verify --base` options, file names that are not UTF-8, links
to themselves, FIFOs, a missing or broken rehearsal plan. Through the CLI, with no engine: each is exit 2 and one
line naming what is wrong."""

from __future__ import annotations

import json
import os
import sys

import pytest
from support import ROOT, edit_spec, no_engine, one_line, run_build_py

BAD_NUMBERS = ["١٢", "²", "1_0", " 12", "+12", "-5", "0", "9" * 5000, "1e3", "12.0"]


@pytest.mark.parametrize("name", ["MILES_ENGINE_TIMEOUT", "MILES_SOURCE_MAX_FILES", "MILES_SOURCE_MAX_BYTES"])
@pytest.mark.parametrize("text", BAD_NUMBERS, ids=range(len(BAD_NUMBERS)))
def test_an_odd_number_in_the_environment_is_exit_2_naming_it(tmp_path, name, text):
    proc = run_build_py("list", env=no_engine(tmp_path, **{name: text}))
    one_line(proc, 2, f"build.py: {name}=", "expected a whole number")


@pytest.mark.parametrize("text", [" 1", "on", "2", "y", "ｔｒｕｅ", "1\n"])
def test_a_gpu_requirement_that_is_not_a_boolean_is_exit_2_naming_it(tmp_path, text):
    proc = run_build_py("list", env=no_engine(tmp_path, MILES_GATES_REQUIRE_GPU=text))
    one_line(proc, 2, "build.py: MILES_GATES_REQUIRE_GPU=", "expected one of 1, true, yes or 0, false, no")


@pytest.mark.parametrize("text", ["1", "TRUE", "yes", "0", "False", "NO", ""])
def test_each_boolean_word_is_taken(tmp_path, text):
    proc = run_build_py("list", env=no_engine(tmp_path, MILES_GATES_REQUIRE_GPU=text))
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


def test_a_build_whose_gpu_gates_can_only_fail_is_refused_first(tmp_path):
    proc = run_build_py("build", "--target", "cuda", env=no_engine(tmp_path, MILES_GATES_REQUIRE_GPU="true"))
    one_line(proc, 2, "MILES_GATES_REQUIRE_GPU is true", "cu13-x86", "build.py verify")
    proc = run_build_py("bake", "--target", "cuda", env=no_engine(tmp_path, MILES_GATES_REQUIRE_GPU="yes"))
    one_line(proc, 2, "MILES_GATES_REQUIRE_GPU is true")


def test_the_gate_runner_requires_a_gpu_by_the_same_words(tmp_path):
    import subprocess

    def runner(value):
        env = dict(os.environ, PYTHONPATH=str(ROOT), MILES_GATES_REQUIRE_GPU=value)
        argv = [sys.executable, "-m", "verify", "--gpu-import", "json"]
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    for value in ("true", "Yes", "1"):
        proc = runner(value)
        assert proc.returncode == 1 and "requires one" in proc.stdout, proc.stdout + proc.stderr
    proc = runner("no")
    assert proc.returncode == 0 and "not run" in proc.stdout, proc.stdout + proc.stderr
    proc = runner("bogus")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "MILES_GATES_REQUIRE_GPU=" in proc.stderr


@pytest.mark.parametrize(
    "args, option",
    [
        (("build", "--target", "smoke", "--target", "miles-cpu"), "--target"),
        (("build", "--target", "smoke", "--tag", "a:1", "--tag", "b:1"), "--tag"),
        (("verify", "--target", "smoke", "--image", "a:1", "--image", "b:1"), "--image"),
        (("render", "--target", "smoke", "-o", "a", "-o", "b"), "-o/--output"),
    ],
)
def test_a_single_valued_option_given_twice_is_exit_2_naming_it(tmp_path, args, option):
    proc = run_build_py(*args, env=no_engine(tmp_path))
    one_line(proc, 2, f"{option}: given twice")


@pytest.mark.parametrize(
    "args, option",
    [
        (("--image", "NOT AN IMAGE"), "--image"),
        (("--image", "x" * 300), "--image"),
        (("--platform", "linux/../../x"), "--platform"),
        (("--platform", "linux"), "--platform"),
    ],
)
def test_verify_base_options_are_validated_like_verify_image(tmp_path, args, option):
    proc = run_build_py("verify", "--target", "cuda", "--base", *args, env=no_engine(tmp_path))
    one_line(proc, 2, f"build.py: {option}: ")


def test_an_output_path_that_is_not_utf8_is_written_and_echoed_escaped(tmp_path):
    import subprocess

    out = os.fsencode(tmp_path) + b"/\xff\xfe.json"
    env = no_engine(tmp_path, PYTHONIOENCODING="utf-8")  # a strict encoder on stdout, as CI may have
    argv = [sys.executable, "build.py", "verify", "--target", "smoke", "--export-cst", out]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert os.path.isfile(out) and b"\\udcff\\udcfe" in proc.stdout


def test_a_source_path_that_is_not_utf8_is_one_line(tmp_path):
    import subprocess

    argv = [sys.executable, "build.py", "build", "--target", "miles-cpu", "--source", b"miles=/no/\xff\xfe"]
    proc = subprocess.run(argv, cwd=ROOT, env=no_engine(tmp_path), capture_output=True, timeout=300)
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "neither a folder nor a tar archive" in lines[0], lines


@pytest.mark.parametrize("which", ["miles", "wheels"])
def test_a_source_that_is_a_link_to_itself_is_one_line(tmp_path, which):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    proc = run_build_py("build", "--target", "miles-cpu", "--source", f"{which}={loop}", env=no_engine(tmp_path))
    one_line(proc, 2, "--source", "Too many levels of symbolic links")


@pytest.mark.parametrize("where", ["given", "in a folder"])
def test_lint_refuses_a_fifo_instead_of_blocking_on_it(tmp_path, where):
    folder = tmp_path / "patches"
    folder.mkdir()
    fifo = folder / "x.patch"
    os.mkfifo(fifo)
    proc = run_build_py("lint", str(fifo if where == "given" else folder), env=no_engine(tmp_path), timeout=120)
    one_line(proc, 2, "lint: not a regular file", str(fifo))


def test_a_command_gate_timeout_a_wait_cannot_take_is_refused_when_the_spec_loads(project_copy, tmp_path):
    def infinite(data):
        data["gates"]["commands"][0]["timeout"] = float("inf")

    edit_spec(project_copy, "smoke", infinite)
    assert ".inf" in (project_copy / "images" / "smoke.yaml").read_text()
    proc = run_build_py("render", "--target", "smoke", cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "images/smoke.yaml", "commands[0].timeout", "at most 86400")


def test_a_pending_pip_record_with_a_digest_never_reaches_a_dockerfile(project_copy, tmp_path):
    """`lock` writes a pin it could not resolve as {"pending": REASON}: a record that also carries a digest (a
    zero one here) would be rendered as the hash pip checks. It is refused naming the key."""
    path = project_copy / "images" / "cuda.lock.json"
    lock = json.loads(path.read_text())
    del lock["closure"]["cu13-x86"]  # the pip section then gives the variant's hashes
    for places in lock["pip"].values():
        for where in places:
            places[where] = {"pending": "its index could not be reached", "sha256": "0" * 64}
    path.write_text(json.dumps(lock))
    proc = run_build_py("render", "--target", "cuda", cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "cuda.lock.json", "a pending record is")
    assert "0" * 64 not in proc.stdout


def _rehearsal(capsys, *argv):
    from ci import gpu_rehearsal

    code = gpu_rehearsal.main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_rehearsal_without_a_plan_is_one_line(tmp_path, capsys):
    err = _rehearsal(capsys, "run", str(tmp_path), "--out", str(tmp_path / "out"))
    assert "plan.json: No such file or directory" in err


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{not json", "plan.json"),
        ("[]", "plan: expected an object"),
        ('{"variant": "x", "shell": ["sh"], "knobs": {"env": {}}, "steps": [{}]}', "plan.steps[0].selector: missing"),
        (json.dumps({"variant": "x", "shell": ["sh"], "knobs": {"env": {}}, "steps": 3}), "plan.steps"),
    ],
)
def test_a_broken_rehearsal_plan_is_one_line(tmp_path, capsys, text, needle):
    (tmp_path / "plan.json").write_text(text)
    assert needle in _rehearsal(capsys, "run", str(tmp_path), "--out", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ("run", "PLAN", "--out", "OUT", "--deadline", "-5"),
        ("run", "PLAN", "--out", "OUT", "--deadline", "١٢"),
        ("run", "PLAN", "--out", "OUT", "--suite-timeout", "0"),
        ("prepare", "--target", "cuda", "--step", "apex", "-o", "OUT", "--timeout", "-1"),
        ("prepare", "--target", "cuda", "--step", "apex", "-o", "OUT", "--timeout", "1e9"),
    ],
)
def test_an_odd_rehearsal_timeout_is_one_line(tmp_path, capsys, argv):
    argv = tuple(str(tmp_path / a) if a in ("PLAN", "OUT") else a for a in argv)
    assert "expected a whole number of seconds" in _rehearsal(capsys, *argv)
