"""The gate-command rule, `gate_argv_problem`, on its own: `{python}` first, then a probe of the bundle
(`probes/NAME.py`) or `-m MODULE` outside the standard library, then that program's own arguments; nothing else. The
cases are the shapes a spec edit used to hollow a gate out with (shells, wrappers, inline code, the interpreter's own
programs); the runner applies the rule again in the image, finds probes in its own bundle only, and ends a gate at its
timeout with everything it started."""

import json
import os
import time

import pytest

from toolkit.spec.catalog import load_catalog
from verify.config import from_dict
from verify.kinds.commands import gate_argv_problem, module_problem, refusals

REFUSED = [
    (["ls", "probes/bridge_attention.py"], 0),
    (["true"], 0),
    (["/bin/true"], 0),
    (["bash", "-c", "{python} probes/bridge_attention.py"], 0),
    (["sh", "-ec", "exit 1"], 0),
    (["env", "{python}", "probes/bridge_attention.py"], 0),
    (["nice", "{python}", "probes/bridge_attention.py"], 0),
    (["timeout", "5", "{python}", "probes/bridge_attention.py"], 0),
    (["busybox", "true"], 0),
    (["python3", "probes/bridge_attention.py"], 0),
    (["{python}"], 0),
    (["{python}", "-c", "pass"], 1),
    (["{python}", "-I", "probes/bridge_attention.py"], 1),
    (["{python}", "../probes/bridge_attention.py"], 1),
    (["{python}", "probes/../verify/__main__.py"], 1),
    (["{python}", "probes/sub/x.py"], 1),
    (["{python}", "/opt/checks/x.py"], 1),
    (["{python}", "x.py"], 1),
    (["{python}", "probes/x.sh"], 1),
    (["{python}", "probes/.py"], 1),
    (["{python}", "-m"], 1),
    (["{python}", "-m", "-c"], 2),
    (["{python}", "-m", "py_compile", "probes/bridge_attention.py"], 2),
    (["{python}", "-m", "runpy", "probes/bridge_attention.py"], 2),
    (["{python}", "-m", "timeit", "pass"], 2),
    (["{python}", "-m", "os.path"], 2),
    (["{python}", "-m", "ensurepip"], 2),
]


@pytest.mark.parametrize("argv,index", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_only_the_image_python_on_a_probe_or_a_module_is_a_gate(argv, index):
    problem = gate_argv_problem(argv)
    assert problem is not None, argv
    assert problem[0] == index, problem


ACCEPTED = [
    ["{python}", "probes/bridge_attention.py"],
    ["{python}", "probes/router_fork.py", "/usr/local/bin/sgl-model-gateway"],
    ["{python}", "probes/te_triplet.py", "2.17.1"],
    ["{python}", "-m", "sglang_attn_bridge.doctor", "--require-sglang"],
    ["{python}", "-m", "pytest", "-q", "tests/x.py"],
    ["{python}", "probes/argv.py", "a; exit 0", "$HOME", "{python}"],  # a probe's arguments are its data
]


@pytest.mark.parametrize("argv", ACCEPTED, ids=[" ".join(a) for a in ACCEPTED])
def test_a_probe_or_a_module_with_its_arguments_is_a_gate(argv):
    assert gate_argv_problem(argv) is None


def test_every_command_of_every_spec_keeps_the_rule():
    seen = 0
    for variant in load_catalog().variants.values():
        cfg = from_dict(variant.gates)
        for command in cfg["commands"] + cfg["gpu_commands"]:
            assert gate_argv_problem(command.argv) is None, (variant.name, command.name)
            seen += 1
    assert seen > 10


def test_a_shell_key_is_refused_naming_it():
    entries = [{"name": "s", "argv": ["{python}", "probes/bridge_attention.py"], "shell": "a pipeline"}]
    with pytest.raises(ValueError) as err:
        from_dict({"commands": entries}, "gates.json")
    assert "key 'commands[0].shell'" in str(err.value) and "\n" not in str(err.value)


def test_refusals_lists_every_refused_entry():
    entries = [
        {"name": "ok", "argv": ["{python}", "probes/bridge_attention.py"]},
        {"name": "a", "argv": ["ls", "probes/bridge_attention.py"]},
        {"name": "b", "argv": ["bash", "-ec", "exit 1"], "shell": "why"},
        {"name": "c", "argv": ["{python}", "-m", "py_compile", "x.py"]},
    ]
    keys = [key for key, _ in refusals(entries)]
    assert keys == ["commands[1].argv[0]", "commands[2].argv[0]", "commands[2].shell", "commands[3].argv[2]"]


def test_a_module_must_be_found_outside_the_standard_library():
    assert module_problem("pytest") is None  # an installed distribution's
    assert "interpreter's own" in module_problem("json")
    assert "no module" in module_problem("no_such_module_xyz")


def test_the_runner_runs_a_probe_of_its_own_bundle_whatever_the_folder(bundle, tmp_path, run_verify, lines):
    """`probes/NAME.py` is the bundle's: a file of that name in the working folder is never what runs."""
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "say.py").write_text("print('the working folder wins')\n")
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"commands": [{"name": "say", "argv": ["{python}", "probes/say.py", "bundled"]}]}))
    proc = run_verify("--config", cfg, cwd=tmp_path, pythonpath=[bundle])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bundled" in lines(proc, "PASS", "command")[0]


def test_a_probe_that_is_a_link_in_the_bundle_does_not_run(bundle, tmp_path, run_verify, lines):
    target = tmp_path / "elsewhere.py"
    target.write_text("print('not shipped')\n")
    link = bundle / "probes" / "linked_probe.py"
    os.symlink(target, link)
    try:
        cfg = tmp_path / "gates.json"
        cfg.write_text(json.dumps({"commands": [{"name": "l", "argv": ["{python}", "probes/linked_probe.py"]}]}))
        proc = run_verify("--config", cfg, cwd=bundle)
    finally:
        link.unlink()
    assert proc.returncode == 1, proc.stdout
    assert "not a regular file" in lines(proc, "FAIL", "command")[0]


def test_a_module_of_the_standard_library_does_not_run(bundle, tmp_path, run_verify, lines):
    """An older runner has no list of the standard library: the module's location decides in the image."""
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"commands": [{"name": "m", "argv": ["{python}", "-m", "no_such_module_xyz"]}]}))
    proc = run_verify("--config", cfg, cwd=bundle)
    assert proc.returncode == 1 and "no module no_such_module_xyz" in lines(proc, "FAIL", "command")[0]


def test_the_runner_ends_a_timed_out_gate_with_everything_it_started(bundle, tmp_path, run_verify, lines):
    """A gate that starts a child and hangs is ended at its timeout, child included (its process group)."""
    marker = tmp_path / "child-alive"
    child = f"import time; time.sleep(4); open({str(marker)!r}, 'w')"
    (bundle / "probes" / "hang.py").write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)\n"
    )
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"commands": [{"name": "hang", "argv": ["{python}", "probes/hang.py"], "timeout": 1}]}))
    started = time.monotonic()
    proc = run_verify("--config", cfg, cwd=bundle)
    assert proc.returncode == 1 and "timed out after 1s" in lines(proc, "FAIL", "command")[0], proc.stdout
    assert time.monotonic() - started < 30
    time.sleep(5)
    assert not marker.exists()  # the child was ended with the gate
