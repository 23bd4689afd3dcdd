"""The gate kinds live in one registry (verify/kinds): the runner's order, its flags, the config schema, the CST
export and the README's table all come from it."""

import json
import shutil
import subprocess
import sys

from support import ROOT as REPO

from verify.__main__ import build_parser
from verify.config import TOP_KEYS
from verify.kinds import KINDS, readme_table
from verify.kinds.base import REGISTERED

README = "verify/README.md"
START = "<!-- gate kinds: generated from verify/kinds by `python3 -m verify.kinds`"
END = "<!-- end gate kinds -->"


def test_readme_table_is_the_registry():
    from support import ROOT

    text = (ROOT / README).read_text()
    block = text[text.index(START) :]
    block = block[block.index("\n") + 1 : block.index(END)]
    assert block == readme_table(), "regenerate the table: python3 -m verify.kinds"


def test_one_kind_per_module_each_with_everything():
    assert [type(k) for k in KINDS] == sorted(REGISTERED, key=lambda c: c.order)
    assert TOP_KEYS == tuple(k.key for k in KINDS)
    for kind in KINDS:
        assert kind.passes_when and kind.kind and kind.key, type(kind).__name__
        assert type(kind).__module__.startswith("verify.kinds."), type(kind).__module__


def test_flags_come_from_the_kinds():
    flags = {a for action in build_parser()._actions for a in action.option_strings}
    assert {"--import", "--compile", "--signature", "--signature-source", "--platform", "--pip-check"} <= flags
    assert {"--provenance", "--config", "--json", "--junit"} <= flags


ENV_KIND = """
import os
from verify.kinds.base import Gate, str_list
from verify.result import CheckResult


class Env(Gate):
    key, kind, order, passes_when = "env", "env", 65, "the variable is set"

    def parse(self, value, where):
        return str_list(value, where, self.key)

    def dump(self, items):
        return list(items)

    def add_flags(self, parser):
        parser.add_argument("--env", action="append", default=[])

    def from_flags(self, args):
        return list(args.env)

    def check(self, name):
        return CheckResult("env", name, name in os.environ, "set" if name in os.environ else "not set")
"""


def test_a_new_kind_is_one_file(tmp_path, lines):
    """Copy the runner, add one module to verify/kinds: the kind is in the schema, the order, the CLI and the table."""
    shutil.copytree(REPO / "verify", tmp_path / "verify", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "verify" / "kinds" / "env.py").write_text(ENV_KIND)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "c.py").write_text("print('a command')\n")
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"env": ["PATH"], "commands": [{"name": "c", "argv": ["{python}", "probes/c.py"]}]}))
    args = ["--config", cfg, "--env", "NO_SUCH_VARIABLE_XYZ", "--import", "json"]
    proc = subprocess.run([sys.executable, "-m", "verify", *args], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [ln.split()[1] for ln in lines(proc)] == ["import", "env", "env", "command"]
    assert "NO_SUCH_VARIABLE_XYZ  not set" in lines(proc, "FAIL", "env")[0]
    table = subprocess.run(
        [sys.executable, "-m", "verify.kinds"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert "| env | `env` | the variable is set | — |" in table
    assert "pip-check, env, command, gpu-command." in table
