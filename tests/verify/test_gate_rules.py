"""What a gate config may say: a `pip check` allow rule names the distribution and the requirement it excuses and
matches no other line; a command gate is the image's Python on a probe or a module, run without a shell."""

import json

import pytest

from toolkit.spec.catalog import load_catalog
from verify.config import ConfigError, from_dict
from verify.kinds.pip_check import AllowRule, PipLine, counterexamples

# ---- pip check allow rules


def _rules(*entries):
    (rules,) = from_dict({"pip_check": {"allow": list(entries)}})["pip_check"]
    return rules


@pytest.mark.parametrize(
    "entry,key,problem",
    [
        ({"match": "requires", "reason": "x"}, "allow[0].match", "a substring can match any pip check line"),
        ({"match": "sglang 0.5.22 requires ", "reason": "x"}, "allow[0].match", "a substring"),
        ({"distribution": "sglang", "reason": "x"}, "allow[0]", "'requirement' or 'requirements'"),
        ({"requirement": "torch", "reason": "x"}, "allow[0].distribution", "is required"),
        ({"distribution": "sglang", "requirement": "torch"}, "allow[0].reason", "is required"),
        (
            {"distribution": "sglang", "requirement": "has requirement", "reason": "x"},
            "allow[0].requirement",
            "PEP 508",
        ),
        ({"distribution": "*", "requirement": "torch", "reason": "x"}, "allow[0].distribution", "PEP 508"),
        ({"distribution": "a", "requirement": "b", "requirements": ["c"], "reason": "x"}, "allow[0]", "one"),
        ({"distribution": "a", "requirements": "b", "reason": "x"}, "allow[0].requirements", "non-empty list"),
    ],
)
def test_an_allow_rule_must_name_distribution_and_requirement(entry, key, problem):
    with pytest.raises(ConfigError) as err:
        from_dict({"pip_check": {"allow": [entry]}}, "gates.json")
    assert err.value.key == "pip_check." + key and problem in err.value.problem, str(err.value)


def test_a_repeated_pair_is_refused():
    rules = [
        {"distribution": "sglang", "requirement": "torch", "reason": "x"},
        {"distribution": "SGLang", "requirements": ["numpy", "Torch"], "reason": "y"},
    ]
    with pytest.raises(ConfigError, match=r"repeats allow\[0\] \(sglang, torch\)"):
        from_dict({"pip_check": {"allow": rules}})


LINES = {
    "sglang 0.5.22 requires torch, which is not installed.": True,
    "sglang 0.5.22 has requirement torch==2.14.1, but you have torch 2.13.0.": True,
    "SGLang 0.5.22 has requirement Torch[cuda]>=2.14; python_version >= '3.10', but you have torch 2.13.0.": True,
    "sglang 0.5.22 requires torchvision, which is not installed.": False,
    "sglang 0.5.22 has requirement numpy<2, but you have numpy 2.1.0.": False,
    "miles 0.1.0 requires torch, which is not installed.": False,
    "sglang-router 0.3.2 requires torch, which is not installed.": False,
    "sglang 0.5.22 is not supported on this platform": False,
    "sglang 0.5.22 requires torch": False,
    "torch 2.13.0 requires sglang, which is not installed.": False,
}


@pytest.mark.parametrize("line", list(LINES))
def test_a_rule_excuses_exactly_its_pair(line):
    (rule,) = _rules({"distribution": "sglang", "requirement": "torch", "reason": "why"})
    assert rule.matches(PipLine.parse(line)) is LINES[line]


def test_every_rule_of_every_spec_matches_no_other_line_shape():
    """The proof lint runs for each rule (`counterexamples` is empty), over the specs' own rules."""
    catalog = load_catalog()
    rules = [r for v in catalog.variants.values() for r in from_dict(v.gates)["pip_check"][0]]
    assert len(rules) >= 8
    assert all(counterexamples(r) == [] for r in rules)
    assert counterexamples(AllowRule("sglang", ("torch",), "x")) == []


def test_the_runner_refuses_the_old_form(tmp_path, run_verify):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"pip_check": {"allow": [{"match": "requires", "reason": "anything"}]}}))
    proc = run_verify("--config", cfg)
    assert proc.returncode == 2 and "pip_check.allow[0].match" in proc.stderr, proc.stderr


# ---- command gates


def _command(argv, **extra):
    return from_dict({"commands": [dict({"name": "c", "argv": argv}, **extra)]})["commands"][0]


@pytest.mark.parametrize(
    "argv,key,problem",
    [
        (["true"], "argv[0]", "the image's Python on a probe"),
        ([":"], "argv[0]", "the image's Python on a probe"),
        (["/bin/true"], "argv[0]", "the image's Python on a probe"),
        (["echo", "ok"], "argv[0]", "the image's Python on a probe"),
        (["env", "A=1", "true"], "argv[0]", "the image's Python on a probe"),
        (["bash", "-c", "python -c 1"], "argv[0]", "the image's Python on a probe"),
        (["/bin/sh", "-c", "x"], "argv[0]", "the image's Python on a probe"),
        (["{python}", "-c", "1"], "argv[1]", "the image's Python on a probe"),
        (["{python}", "/tmp/x.py"], "argv[1]", "the image's Python on a probe"),
        (["{python}", "-m", "json.tool"], "argv[2]", "the interpreter's own program"),
    ],
)
def test_a_command_that_is_not_a_probe_or_a_module_is_refused(argv, key, problem):
    with pytest.raises(ConfigError) as err:
        _command(argv)
    assert err.value.key == "commands[0]." + key and problem in err.value.problem, str(err.value)


def test_a_command_runs_without_a_shell(bundle, tmp_path, run_verify, lines):
    cfg = tmp_path / "gates.json"
    argv = ["{python}", "probes/argv.py", "a; exit 0", "$HOME"]
    cfg.write_text(json.dumps({"commands": [{"name": "literal", "argv": argv}]}))
    proc = run_verify("--config", cfg, cwd=bundle)
    assert proc.returncode == 0, proc.stdout
    assert "['a; exit 0', '$HOME']" in lines(proc, "PASS", "command")[0]
    argv.append("one more")
    cfg.write_text(json.dumps({"commands": [{"name": "literal", "argv": argv}]}))
    proc = run_verify("--config", cfg, cwd=bundle)
    assert proc.returncode == 1 and "exit 1:" in lines(proc, "FAIL", "command")[0]


def test_the_specs_commands_are_the_image_python():
    for variant in load_catalog().variants.values():
        for cmd in from_dict(variant.gates)["commands"]:
            assert cmd.argv[0] == "{python}", (variant.name, cmd.name)
