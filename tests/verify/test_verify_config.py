"""Config validation: exit 2 and one line on stderr naming the file and the key."""

import json

import pytest

from verify.config import ConfigError, from_dict, load_config

BAD = [
    ({"imports": "sglang"}, "'imports'"),
    ({"imports": ["ok", "not a module"]}, "'imports[1]'"),
    ({"compile": [""]}, "'compile'"),
    ({"signatures": [{"keywords": ["q"]}]}, "'signatures[0].target'"),
    ({"signatures": [{"target": "no_colon"}]}, "'signatures[0].target'"),
    ({"signatures": [{"target": "m:f", "keywords": "q,o"}]}, "'signatures[0].keywords'"),
    ({"signatures": [{"target": "m:f", "import": "no"}]}, "'signatures[0].import'"),
    ({"signatures": [{"target": "m:f", "kwargs": []}]}, "'signatures[0].kwargs'"),
    ({"platform": "metal"}, "'platform'"),
    ({"pip_check": {"allow": [{"distribution": "x", "requirement": "y"}]}}, "'pip_check.allow[0].reason'"),
    ({"pip_check": {"allow": [{"match": "requires", "reason": "r"}]}}, "'pip_check.allow[0].match'"),
    ({"pip_check": {"allow": [{"distribution": "x", "reason": "r"}]}}, "'pip_check.allow[0]'"),
    (
        {"pip_check": {"allow": [{"distribution": "x y", "requirement": "z", "reason": "r"}]}},
        "'pip_check.allow[0].distribution'",
    ),
    (
        {"pip_check": {"allow": [{"distribution": "x", "requirements": [], "reason": "r"}]}},
        "'pip_check.allow[0].requirements'",
    ),
    ({"pip_check": "yes"}, "'pip_check'"),
    ({"provenance": {"miles": "opt/miles"}}, "'provenance.miles'"),
    ({"provenance": ["miles"]}, "'provenance'"),
    ({"commands": [{"name": "doctor", "argv": []}]}, "'commands[0].argv'"),
    ({"commands": [{"argv": ["x"]}]}, "'commands[0].name'"),
    ({"commands": [{"name": "d", "argv": ["{python}", "probes/x.py"], "timeout": -1}]}, "'commands[0].timeout'"),
    ({"import": ["sglang"]}, "'import'"),
]


@pytest.mark.parametrize("data,key", BAD, ids=[k for _, k in BAD])
def test_bad_config_exit_2_one_line_naming_key(tmp_path, run_verify, data, key):
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps(data))
    proc = run_verify("--config", cfg)
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and str(cfg) in err[0] and key in err[0], err


def test_unreadable_and_invalid_json(tmp_path, run_verify):
    missing = tmp_path / "nope.json"
    proc = run_verify("--config", missing)
    assert proc.returncode == 2 and str(missing) in proc.stderr and len(proc.stderr.splitlines()) == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"imports": ["a",\n ]}')
    proc = run_verify("--config", broken)
    assert proc.returncode == 2 and "%s: invalid JSON at line 2" % broken in proc.stderr
    top = tmp_path / "list.json"
    top.write_text("[]")
    proc = run_verify("--config", top)
    assert proc.returncode == 2 and "top level must be a JSON object" in proc.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        ([], "nothing to check"),
        (["--platform", "tpu"], "--platform"),
        (["--signature", "nocolon"], "nocolon"),
        (["--signature", "m:f=q,not-a-name"], "not-a-name"),
        (["--provenance", "miles"], "PKG=site-packages"),
        (["--provenance", "miles=relative/dir"], "provenance"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_usage_exit_2_one_line(run_verify, args, needle):
    proc = run_verify(*args)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_full_shape_round_trip(tmp_path):
    data = {
        "imports": ["sglang", "miles.backends.fsdp_utils"],
        "compile": ["miles", "sglang_attn_bridge", "/opt/extra"],
        "signatures": [
            {"target": "pkg.mod:func", "keywords": ["q", "o"], "import": False},
            {"target": "pkg.mod:Cls.method"},
        ],
        "platform": "rocm",
        "pip_check": {"allow": [{"distribution": "somepkg", "requirement": "otherpkg", "reason": "why"}]},
        "provenance": {"sglang_attn_bridge": "site-packages", "miles": "/opt/miles"},
        "commands": [{"name": "bridge-doctor", "argv": ["{python}", "-m", "sglang_attn_bridge.doctor"]}],
    }
    path = tmp_path / "gates.json"
    path.write_text(json.dumps(data))
    cfg = load_config(str(path))
    assert cfg["signatures"][0].use_import is False and cfg["signatures"][0].keywords == ["q", "o"]
    assert cfg["signatures"][1].keywords is None and cfg["signatures"][1].attr == "Cls.method"
    (rules,) = cfg["pip_check"]
    assert rules[0].reason == "why" and dict(cfg["provenance"])["miles"] == "/opt/miles"
    assert cfg["commands"][0].argv[0] == "{python}"
    assert from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()  # every kind dumps what it parses


def test_pip_check_absent_null_and_empty():
    assert "pip_check" not in from_dict({})
    assert "pip_check" not in from_dict({"pip_check": None})
    assert "pip_check" not in from_dict({"pip_check": False})
    assert from_dict({"pip_check": {}})["pip_check"] == [[]]
    assert from_dict({"pip_check": {"allow": []}})["pip_check"] == [[]]
    with pytest.raises(ConfigError):
        from_dict({"pip_check": {"deny": []}})
