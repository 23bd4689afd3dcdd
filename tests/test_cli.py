"""CLI contract (docs/architecture.md): subcommands, the `--target` shorthand and exit codes, without a Docker
engine."""

from __future__ import annotations

from support import no_engine, one_line, run_build_py

from toolkit.engine.docker_engine import ProgressParser


def test_list_names_every_target_and_alias():
    proc = run_build_py("list")
    assert proc.returncode == 0
    for name in (
        "rocm720-mi35x",
        "rocm700-mi35x",
        "rocm700-mi30x",
        "cu13-x86",
        "cu13",
        "cu13-aarch64",
        "cu12-x86",
        "smoke",
    ):
        assert any(line.split()[0] == name for line in proc.stdout.splitlines()), name
    assert "alias: rocm" in proc.stdout and "alias: cuda" in proc.stdout


def test_usage_errors_exit_2():
    assert run_build_py().returncode == 2
    assert run_build_py("frobnicate").returncode == 2
    assert run_build_py("render").returncode == 2  # --target missing
    proc = run_build_py("render", "--target", "nope")
    assert proc.returncode == 2 and "unknown target 'nope'" in proc.stderr
    proc = run_build_py("build", "--target", "smoke", "--secret", "nonsense")
    assert proc.returncode == 2 and "--secret 'nonsense'" in proc.stderr


def test_no_engine_exits_3_with_a_hint(tmp_path):
    env = no_engine(tmp_path)
    proc = run_build_py("--target", "smoke", env=env)
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "no Docker engine answers" in proc.stderr and "dockerd" in proc.stderr


def test_target_shorthand_is_build(tmp_path):
    env = no_engine(tmp_path)
    # Reaches the engine stage (exit 3), so it parsed as `build --target smoke`.
    assert run_build_py("--target", "smoke", env=env).returncode == 3
    assert run_build_py("--target", "nope", env=env).returncode == 2


def test_clean_without_an_engine_is_exit_3_and_its_folders_need_none(tmp_path):
    env = no_engine(tmp_path)
    proc = run_build_py("clean", "--dry-run", env=env)  # images are to be listed: the engine is asked first
    one_line(proc, 3, "no Docker engine answers")
    assert proc.stdout == ""
    proc = run_build_py("clean", "--no-images", "--dry-run", env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("clean --dry-run: would remove 0 image(s) and ")


def test_clean_usage_errors_exit_2(tmp_path):
    env = no_engine(tmp_path)
    one_line(run_build_py("clean", "--target", "smoke", "--build-cache", env=env), 2, "--target", "--build-cache")
    one_line(run_build_py("clean", "--target", "no such/name", env=env), 2, "--target")
    one_line(run_build_py("clean", "--dry-run", "--frobnicate", env=env), 2, "--frobnicate")


PLAIN_STREAM = """\
#1 [internal] load build definition from Dockerfile
#1 transferring dockerfile: 1.2kB done
#1 DONE 0.0s
#4 [2/4] RUN python3 -m venv /opt/venv
#4 DONE 4.6s
#5 [3/4] RUN pip install x
#5 CACHED
#6 [4/4] RUN cd /tmp/gates && python -m verify --config gates.json
#6 0.512 PASS  import  sglang_attn_bridge  ok  (0.10s)
#6 0.513 FAIL  import  nosuchmod  ModuleNotFoundError: No module named 'nosuchmod'  (0.00s)
#6 0.514 1 passed, 1 failed
#6 ERROR: executor failed running [/bin/sh -c cd /tmp/gates]: exit code: 1
------
ERROR: failed to solve: exit code: 1
"""


def test_progress_parser_reports_steps_and_the_failing_step():
    lines = []
    parser = ProgressParser(lines.append, raw=False)
    for line in PLAIN_STREAM.splitlines():
        parser.feed(line)
    assert any("[2/4] RUN python3 -m venv /opt/venv" in ln and ln.endswith("4.6s") for ln in lines)
    assert any("[3/4] RUN pip install x" in ln and ln.endswith("cached") for ln in lines)
    assert not any("[internal]" in ln for ln in lines)
    failed = parser.failed_step()
    assert failed is not None and "[4/4]" in failed.name
    assert any("nosuchmod" in ln for ln in failed.log)


def test_verbose_reaches_the_build_request_and_the_verify_command():
    import build
    from toolkit.request import BuildRequest

    args = build.parser().parse_args(["build", "--target", "smoke", "--verbose"])
    assert BuildRequest.from_args(args).verbose is True
    assert BuildRequest.from_args(build.parser().parse_args(["build", "--target", "smoke"])).verbose is False
    assert build.parser().parse_args(["verify", "--target", "smoke", "--verbose"]).verbose is True
