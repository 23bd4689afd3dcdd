"""The gate-command rule, `gate_argv_problem`, on its own: without `shell` a gate is the image's Python on a script
file or a module outside the standard library, nothing else; with `shell`, a script that cannot hide a failure and
starts no other shell or Python. The cases are the shapes a spec edit used to hollow a gate out with; the runner's
own timeout ends the gate's whole process group."""

import json
import time

import pytest

from verify.kinds.commands import gate_argv_problem, refusals

REFUSED_WITHOUT_SHELL = [
    ["ls", "probes/bridge_attention.py"],
    ["test", "-f", "probes/bridge_attention.py"],
    ["{python}", "-c", "pass", "probes/bridge_attention.py"],
    ["{python}", "-m", "py_compile", "probes/bridge_attention.py"],
    ["{python}", "-m", "runpy", "probes/bridge_attention.py"],
    ["{python}", "-m", "timeit", "pass"],
    ["{python}", "-I", "probes/bridge_attention.py"],
    ["{python}", "../probes/bridge_attention.py"],
    ["{python}"],
    ["python3", "probes/bridge_attention.py"],
    ["nice", "sh", "-c", "false || true"],
    ["timeout", "5", "bash", "-c", "exit 0"],
    ["nohup", "{python}", "probes/bridge_attention.py"],
    ["xargs", "-a", "/dev/null", "false"],
    ["busybox", "true"],
    ["env", "{python}", "-c", "pass"],
    ["/usr/bin/env", "-S", "true"],
    ["stdbuf", "-o0", "{python}", "probes/x.py"],
]


@pytest.mark.parametrize("argv", REFUSED_WITHOUT_SHELL, ids=[" ".join(a) for a in REFUSED_WITHOUT_SHELL])
def test_without_shell_only_the_image_python_on_a_script_or_module_runs(argv):
    problem = gate_argv_problem(argv, None)
    assert problem is not None, argv
    assert 0 <= problem[0] < max(len(argv), 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["{python}", "probes/bridge_attention.py"],
        ["{python}", "probes/router_fork.py", "/usr/local/bin/sgl-model-gateway"],
        ["{python}", "-m", "sglang_attn_bridge.doctor", "--require-sglang"],
        ["{python}", "-m", "pytest", "-q", "tests/x.py"],
        ["{python}", "/opt/checks/x.py"],
    ],
)
def test_the_image_python_on_a_script_or_module_is_a_gate(argv):
    assert gate_argv_problem(argv, None) is None


REFUSED_SCRIPTS = [
    ("exit 256", "can wrap to 0"),
    ("cmd && exit 512", "can wrap to 0"),
    ("cmd || exit 256", "can wrap to 0"),
    ("cmd || exit $X", "can wrap to 0"),
    ("trap 'exit 0' EXIT; cmd", "trap"),
    ("cmd; set -e; other", "after the first command"),
    ("set -- -e; cmd; other", "runs on after"),
    ("set -e; cmd && other; last", "a list `set -e` ignores"),
    ("set -e; if cmd; then :; fi; other", "simple commands"),
    ("set -e; f() { cmd; }; f; other", "simple commands"),
    ("set -e; ( cmd ); other", "simple commands"),
    ("set -e; { cmd; }; other", "simple commands"),
    ("set -e; while cmd; do :; done", "simple commands"),
    ("sh -c 'cmd || true'", "starts another shell"),
    ("env sh -c 'cmd || true'", "starts another shell"),
    ("timeout 5 bash -c 'cmd || true'", "starts another shell"),
    ("xargs sh -c 'cmd || :' < /dev/null", "starts another shell"),
    ("nice busybox sh -c 'cmd'", "starts another shell"),
    ("eval 'cmd || true'", "starts another shell"),
    ("{python} -c 'import os; os.system(\"cmd\")'", "starts another shell"),
]


@pytest.mark.parametrize("script,problem", REFUSED_SCRIPTS, ids=[s for s, _ in REFUSED_SCRIPTS])
def test_a_shell_gate_script_that_can_pass_after_a_failure_is_refused(script, problem):
    found = gate_argv_problem(["bash", "-c", script], "a pipeline")
    assert found is not None and problem in found[1], (script, found)
    assert found[0] == 2  # the script is the argument at fault


def test_a_shell_gate_needs_its_shell_as_the_program_and_a_script():
    assert "runs a shell" in gate_argv_problem(["bash", "-ec", "cmd"], None)[1]
    assert "through env" in gate_argv_problem(["env", "bash", "-ec", "cmd"], "r")[1]
    assert "script file" in gate_argv_problem(["bash", "check.sh"], "r")[1]
    assert gate_argv_problem(["bash", "-euo", "pipefail", "-c", "cmd | tee log && {python} probes/x.py"], "r") is None


def test_refusals_lists_every_refused_entry():
    entries = [
        {"name": "ok", "argv": ["{python}", "probes/bridge_attention.py"]},
        {"name": "a", "argv": ["ls", "probes/bridge_attention.py"]},
        {"name": "b", "argv": ["bash", "-ec", "exit 256"], "shell": "why"},
        {"name": "c", "argv": ["{python}", "-m", "py_compile", "x.py"]},
    ]
    keys = [key for key, _ in refusals(entries)]
    assert keys == ["commands[1].argv[0]", "commands[2].argv[2]", "commands[3].argv[2]"]


def test_the_runner_ends_a_timed_out_gate_with_everything_it_started(tmp_path, run_verify, lines):
    """A gate that starts a child and hangs is ended at its timeout, child included (its process group)."""
    marker = tmp_path / "child-alive"
    script = tmp_path / "hang.py"
    child = f"import time; time.sleep(4); open({str(marker)!r}, 'w')"
    script.write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)\n"
    )
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"commands": [{"name": "hang", "argv": ["{python}", str(script)], "timeout": 1}]}))
    started = time.monotonic()
    proc = run_verify("--config", cfg)
    assert proc.returncode == 1 and "timed out after 1s" in lines(proc, "FAIL", "command")[0], proc.stdout
    assert time.monotonic() - started < 30
    time.sleep(5)
    assert not marker.exists()  # the child was ended with the gate
