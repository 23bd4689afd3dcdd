"""Gates a broken image cannot satisfy, through the CLI with no engine: every spec calls the bridge's attention, a
`pip check` allowance names what it excuses, a command gate is the image's Python on a probe the repository ships
(a regular file, never a link) or a module outside the standard library. Each is refused by
`build` (exit 2, one line naming file and key, before the engine) and listed by `lint`."""

from __future__ import annotations

import pytest
import yaml
from support import ROOT, edit_spec, no_engine, run_build_py


def _edit(project, family, fn):
    edit_spec(project, family, lambda data: fn(data["gates"]))


def _without_bridge_probe(gates):
    gates["commands"] = [c for c in gates["commands"] if "probes/bridge_attention.py" not in c["argv"]]


def _swap_probe(gates, argv):
    """The bridge probe's gate, its argv replaced (the probe's path still in it)."""
    (probe,) = [c for c in gates["commands"] if "probes/bridge_attention.py" in c["argv"]]
    probe["argv"] = argv


MILES_CPU_ALLOWANCES = len(
    yaml.safe_load((ROOT / "images" / "miles-cpu.yaml").read_text())["gates"]["pip_check"]["allow"]
)

CASES = [
    ("no bridge attention gate", "smoke", _without_bridge_probe, "gates.commands", "probes/bridge_attention.py"),
    (
        "allowance by substring",
        "smoke",
        lambda g: g.update(pip_check={"allow": [{"match": "requires", "reason": "x"}]}),
        "gates.pip_check.allow[0].match",
        "a substring can match any pip check line",
    ),
    (
        "allowance without a requirement",
        "miles-cpu",
        lambda g: g["pip_check"]["allow"].append({"distribution": "sglang", "reason": "everything"}),
        f"gates.pip_check.allow[{MILES_CPU_ALLOWANCES}]",  # the one appended after the spec's own
        "names the requirement it excuses",
    ),
    (
        "shell gate",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["{python}", "probes/bridge_attention.py"], "shell": "w"}),
        "gates.commands[2].shell",
        "gates run no shell",
    ),
    (
        "shell as the program",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["bash", "-c", "cmd||:"]}),
        "gates.commands[2].argv[0]",
        "the image's Python on a probe",
    ),
    (
        "probe the repository does not ship",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["{python}", "probes/no_such_probe.py"]}),
        "gates.commands[2].argv[1]",
        "verify/probes/no_such_probe.py is not a file of the repository",
    ),
    (
        "script elsewhere in the image",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["{python}", "/opt/venv/check.py"]}),
        "gates.commands[2].argv[1]",
        "no other program, option or script",
    ),
    (
        "argv true",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["true"]}),
        "gates.commands[2].argv[0]",
        "the image's Python on a probe",
    ),
    (
        "probe only named",
        "smoke",
        lambda g: _swap_probe(g, ["ls", "probes/bridge_attention.py"]),
        "gates.commands[1].argv[0]",
        "the image's Python on a probe",
    ),
    (
        "probe after inline code",
        "smoke",
        lambda g: _swap_probe(g, ["{python}", "-c", "pass", "probes/bridge_attention.py"]),
        "gates.commands[1].argv[1]",
        "no other program, option or script",
    ),
    (
        "probe byte-compiled only",
        "smoke",
        lambda g: _swap_probe(g, ["{python}", "-m", "py_compile", "probes/bridge_attention.py"]),
        "gates.commands[1].argv[2]",
        "the interpreter's own program",
    ),
    (
        "probe as an argument of another script",
        "smoke",
        lambda g: _swap_probe(g, ["{python}", "probes/router_fork.py", "probes/bridge_attention.py"]),
        "gates.commands",
        "as the script of the image's Python",
    ),
    (
        "wrapper starting a shell",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["nice", "sh", "-c", "false || true"]}),
        "gates.commands[2].argv[0]",
        "the image's Python on a probe",
    ),
]


@pytest.mark.parametrize("family,mutate,key,problem", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_dishonest_gates_are_refused_and_linted(project_copy, tmp_path, family, mutate, key, problem):
    _edit(project_copy, family, mutate)
    target = "smoke" if family == "smoke" else "miles-cpu"
    env = no_engine(tmp_path)
    proc = run_build_py("build", "--target", target, cwd=project_copy, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert f"images/{family}.yaml: {key}: " in lines[0] and problem in lines[0], lines[0]
    assert not (project_copy / "build").exists()
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1 and f"spec: images/{family}.yaml: {key}: " in proc.stdout, proc.stdout


def test_lint_lists_every_refused_gate_command(project_copy):
    """One lint run names each command gate the rule refuses, not only the first a build stops at."""

    def hollow(gates):
        gates["commands"] += [
            {"name": "a", "argv": ["ls", "probes/bridge_attention.py"]},
            {"name": "b", "argv": ["timeout", "5", "bash", "-c", "exit 0"]},
            {"name": "c", "argv": ["bash", "-ec", "trap 'exit 0' EXIT; false"], "shell": "why"},
        ]
        gates["gpu_commands"] = [{"name": "d", "argv": ["{python}", "-m", "runpy", "probes/kernel_apex.py"]}]

    _edit(project_copy, "smoke", hollow)
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    keys = ["commands[2].argv[0]", "commands[3].argv[0]", "commands[4].argv[0]", "commands[4].shell"]
    for key in keys + ["gpu_commands[0].argv[2]"]:
        assert f"spec: images/smoke.yaml: gates.{key}: " in proc.stdout, proc.stdout
    assert proc.stdout.count("spec: images/smoke.yaml: ") == 5, proc.stdout


@pytest.mark.parametrize("inside", [False, True], ids=["out of the repository", "inside it"])
def test_a_probe_that_is_a_link_is_refused_before_it_is_shipped(project_copy, tmp_path, inside):
    """A probe of verify/probes/ that is a link (out of the repository, or to a file of it) is never shipped: the spec
    that names it is refused, and so is every build, since the gate bundle ships every probe."""
    outside = tmp_path / "outside.py"
    outside.write_text("print('not the repository')\n")
    link = project_copy / "verify" / "probes" / "linked.py"
    link.symlink_to(project_copy / "verify" / "probes" / "router_fork.py" if inside else outside)
    env = no_engine(tmp_path)
    proc = run_build_py("build", "--target", "smoke", cwd=project_copy, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert "verify/probes/linked.py is a link" in lines[0] and "gate bundle" in lines[0], lines[0]
    assert not (project_copy / "build").exists()
    linked = {"name": "l", "argv": ["{python}", "probes/linked.py"]}
    _edit(project_copy, "smoke", lambda g: g["commands"].append(linked))
    proc = run_build_py("build", "--target", "smoke", cwd=project_copy, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert "images/smoke.yaml: gates.commands[2].argv[1]: verify/probes/linked.py is a link" in lines[0], lines[0]
