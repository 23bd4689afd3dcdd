"""Gates a broken image cannot satisfy, through the CLI with no engine: every spec calls the bridge's attention, a
`pip check` allowance names what it excuses, a command gate that cannot fail is refused. Each is refused by
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
        "shell that swallows",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["bash", "-c", "cmd||:"], "shell": "why"}),
        "gates.commands[2].argv[2]",
        "passes when `cmd` fails",
    ),
    (
        "shell chained to success",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["bash", "-c", "cmd; echo ok"], "shell": "why"}),
        "gates.commands[2].argv[2]",
        "runs on after `cmd` fails",
    ),
    (
        "argv true",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["true"]}),
        "gates.commands[2].argv[0]",
        "cannot fail",
    ),
    (
        "probe only named",
        "smoke",
        lambda g: _swap_probe(g, ["ls", "probes/bridge_attention.py"]),
        "gates.commands[1].argv[0]",
        "the image's Python on a script or a module",
    ),
    (
        "probe after inline code",
        "smoke",
        lambda g: _swap_probe(g, ["{python}", "-c", "pass", "probes/bridge_attention.py"]),
        "gates.commands[1].argv[1]",
        "no other program, option or inline code",
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
        "the image's Python on a script or a module",
    ),
    (
        "exit status that wraps",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["bash", "-ec", "exit 256"], "shell": "why"}),
        "gates.commands[2].argv[2]",
        "can wrap to 0",
    ),
    (
        "shell without a reason",
        "smoke",
        lambda g: g["commands"].append({"name": "c", "argv": ["bash", "-c", "{python} -m pytest"]}),
        "gates.commands[2].argv[0]",
        "runs a shell",
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

    _edit(project_copy, "smoke", hollow)
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for key in ("gates.commands[2].argv[0]", "gates.commands[3].argv[0]", "gates.commands[4].argv[2]"):
        assert f"spec: images/smoke.yaml: {key}: " in proc.stdout, proc.stdout
    assert proc.stdout.count("spec: images/smoke.yaml: ") == 3, proc.stdout
