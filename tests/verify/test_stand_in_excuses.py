"""A stand-in build's excuses (verify/stand_in.py): a failed check is excused only when its own failure names a
module or distribution of a skipped step or a difference; everything else still fails the run."""

import json

import pytest

from verify import stand_in
from verify.kinds.base import ConfigError
from verify.result import CheckResult

RULES = {
    "not_built": [
        {
            "step": "pip flash-attn",
            "why": "compiles native code",
            "modules": ["flash_attn"],
            "distributions": ["flash-attn"],
            "paths": [],
        },
        {
            "step": "source apex",
            "why": "git checkout apex not fetched here",
            "modules": ["apex", "amp_C"],
            "distributions": ["apex"],
            "paths": ["/usr/local/bin/apex-tool"],
        },
    ],
    "differs": [
        {
            "why": "sglang from the index in place of source sglang_miles",
            "modules": ["sglang"],
            "distributions": ["sglang"],
            "paths": [],
        }
    ],
}


def failed(kind, target, detail):
    return stand_in.excuse(CheckResult(kind, target, False, detail), stand_in.parse(RULES, "gates.json"))


@pytest.mark.parametrize(
    "kind, target, detail, excused",
    [
        ("import", "flash_attn", "ModuleNotFoundError: No module named 'flash_attn'", "not built here: pip flash-attn"),
        (
            "stub-import",
            "megatron.core",
            "ModuleNotFoundError: No module named 'amp_C' at x.py:3",
            "not built here: source apex",
        ),
        (
            "import",
            "flash_attn",
            "a namespace package (no __init__.py), not the package: portions found: /x",
            "not built here: pip flash-attn",
        ),
        (
            "import",
            "miles.x",
            "ImportError: cannot import name 'f' from 'sglang.srt.utils' (/s.py)",
            "differs from base: sglang",
        ),
        (
            "pip-check",
            "megatron-core",
            "megatron-core 0.1 requires apex, which is not installed.",
            "not built here: source apex",
        ),
        (
            "pip-check",
            "sglang",
            "sglang 0.5.16 has requirement torch==2.9, but you have torch 2.11.0.",
            "differs from base: sglang",
        ),
        (
            "command",
            "te",
            "exit 1: PackageNotFoundError: No package metadata was found for Flash_Attn",
            "not built here: pip flash-attn",
        ),
        (
            "command",
            "tool",
            "exit 1: /usr/local/bin/apex-tool: No such file or directory",
            "not built here: source apex",
        ),
    ],
)
def test_a_failure_naming_what_a_rule_covers_is_excused(kind, target, detail, excused):
    res = failed(kind, target, detail)
    assert res.status == "EXCUSED" and not res.failed and res.excused.startswith(excused)


@pytest.mark.parametrize(
    "kind, target, detail",
    [
        ("import", "megatron.core", "OSError: libcuda.so.1: cannot open shared object file"),  # not a missing module
        ("import", "flash_attn_x", "ModuleNotFoundError: No module named 'flash_attnx'"),  # a prefix, not the module
        ("import", "mbridge", "ModuleNotFoundError: No module named 'mbridge'"),  # no rule names it
        ("command", "probes/x.py", "No module named 'flash_attn'"),  # a command's output is not an import's failure
        ("command", "tool", "exit 1: /usr/local/bin/other: No such file or directory"),  # a file no rule lists
        ("pip-check", "torch", "torch 2.11.0 requires triton==3.6.0, which is not installed."),
    ],
)
def test_every_other_failure_still_fails(kind, target, detail):
    res = failed(kind, target, detail)
    assert res.status == "FAIL" and res.failed and res.excused is None


@pytest.mark.parametrize(
    "section, problem",
    [
        ({"other": []}, "must be a mapping"),
        ({"not_built": [{"why": "w", "modules": ["m"], "distributions": [], "paths": []}]}, "exactly the keys"),
        ({"differs": [{"why": "", "modules": ["m"], "distributions": [], "paths": []}]}, "one line"),
        ({"differs": [{"why": "w", "modules": [], "distributions": [], "paths": []}]}, "could excuse nothing"),
        ({"differs": [{"why": "w", "modules": ["a b"], "distributions": [], "paths": []}]}, "module names"),
        ({"differs": [{"why": "w", "modules": [], "distributions": [], "paths": ["bin/x"]}]}, "absolute paths"),
    ],
)
def test_a_bad_section_is_refused_naming_its_key(section, problem):
    with pytest.raises(ConfigError, match=problem):
        stand_in.parse(section, "gates.json")


def test_the_runner_exits_0_with_only_excused_failures_and_1_with_any_other(tmp_path, run_verify, write_tree):
    write_tree(tmp_path, {"ok/__init__.py": "", "broken/__init__.py": "raise RuntimeError('real')\n"})
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"imports": ["ok", "flash_attn"], "stand_in": RULES}))
    proc = run_verify("--config", cfg, "--json", tmp_path / "r.json", pythonpath=[tmp_path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "EXCUSED  import      flash_attn  not built here: pip flash-attn" in proc.stdout
    assert "1 passed, 0 failed, 1 not built here" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["status"] for c in report["checks"]] == ["PASS", "EXCUSED"] and report["failed"] == 0
    cfg.write_text(json.dumps({"imports": ["broken", "flash_attn"], "stand_in": RULES}))
    proc = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert proc.returncode == 1 and "0 passed, 1 failed, 1 not built here" in proc.stdout


def test_a_report_that_excuses_checks_is_refused_for_a_config_without_the_section(tmp_path, run_verify, write_tree):
    """The toolkit's judge: EXCUSED only where the build's own gate config has a stand_in section."""
    from toolkit.gates.report import report_problem

    write_tree(tmp_path, {"ok/__init__.py": ""})
    gates = {"imports": ["ok", "flash_attn"], "stand_in": RULES}
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps(gates))
    nonce = "ab" * 16
    proc = run_verify("--config", cfg, "--nonce", nonce, "--json", tmp_path / "r.json", pythonpath=[tmp_path])
    assert proc.returncode == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report_problem(report, nonce, gates) is None
    plain = {k: v for k, v in gates.items() if k != "stand_in"}
    assert "only a stand-in build" in report_problem(report, nonce, plain)
    report["checks"][1]["excused"] = "not built here: something else"  # an edited excuse breaks the proof
    assert "proof" in report_problem(report, nonce, gates)


def test_a_missing_file_inside_a_skipped_package_and_a_provenance_gate_are_named_by_their_module():
    rules = {
        "not_built": [
            {"step": "pip te", "why": "compiles", "modules": ["transformer_engine"], "distributions": [], "paths": []}
        ],
        "differs": [{"why": "the index's sglang", "modules": ["sglang"], "distributions": ["sglang"], "paths": []}],
    }
    site = "/usr/lib/python3/site-packages"
    te = f"FileNotFoundError: Could not find shared object file at {site}/transformer_engine/common/__init__.py:128"
    assert stand_in.excuse(CheckResult("import", "megatron.core", False, te), rules).excused.startswith(
        "not built here: pip te"
    )
    own = "OSError: libcuda.so.1 at /usr/lib/python3/site-packages/transformer_engine/common/__init__.py:128"
    assert (
        stand_in.excuse(CheckResult("import", "megatron.core", False, own), rules).excused is None
    )  # not a missing file
    elsewhere = "FileNotFoundError: x at /usr/lib/python3/site-packages/megatron/core/__init__.py:1"
    assert stand_in.excuse(CheckResult("import", "megatron.core", False, elsewhere), rules).excused is None
    prov = CheckResult("provenance", "sglang", False, "resolves to /x/sglang, not under /sgl-workspace/sglang/python")
    assert stand_in.excuse(prov, rules).excused.startswith("differs from base: the index's sglang")
