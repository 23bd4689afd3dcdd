"""ci/miles_start_imports.py: the committed images/miles-start-imports.json is what the pinned miles commit's
snapshot gives (a miles bump without a regeneration fails here), and its rules hold on a small tree written for
the purpose: guarded and TYPE_CHECKING imports skipped, function-level and transitive imports followed, relative
imports resolved, the start paths found by what the tree defines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml
from support import ROOT, UPSTREAM, git, git_init, snapshot_of

from ci import miles_start_imports as msi

COMMITTED = ROOT / "images" / "miles-start-imports.json"


def _pin() -> str:
    layer = yaml.safe_load((ROOT / "images" / "layers" / "miles.yaml").read_text())
    return layer["components"]["miles"]["ref"]


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ci.miles_start_imports", *map(str, args)], cwd=ROOT, capture_output=True, text=True
    )


def test_the_committed_list_is_the_pinned_commits():
    committed = json.loads(COMMITTED.read_text())
    assert committed["miles_commit"] == _pin(), "miles moved: regenerate images/miles-start-imports.json"
    snapshot = snapshot_of(_pin())
    assert snapshot is not None, f"no snapshot of miles {_pin()} in {UPSTREAM} (CONTRIBUTING.md, 'Bump miles')"
    proc = _cli("--source", snapshot, "--check", COMMITTED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # what the gates need from it, on this release: the Megatron actor's and the router's own imports
    union, paths = committed["union"], committed["start_paths"]
    for name in ("megatron.training.global_vars", "torch_memory_saver", "ray", "sglang_router.launch_router"):
        assert name in union and any(g == name or g.startswith(name + ".") for g in committed["gate"]), name
    saver = paths["megatron_actor"]["imports"]["torch_memory_saver"]
    assert saver["eager"] and "miles.backends.megatron_utils.actor" in saver["importers"]
    assert "deep_ep" in paths["megatron_actor"]["optional"] and "deep_ep" not in union  # try/except ImportError
    assert all(not p["unresolved"] for p in paths.values())


def test_check_reports_a_stale_list(tmp_path):
    snapshot = snapshot_of(_pin())
    assert snapshot is not None
    stale = json.loads(COMMITTED.read_text())
    stale["gate"].remove("ray.util.placement_group")
    (tmp_path / "stale.json").write_text(msi.render(stale))
    proc = _cli("--source", snapshot, "--check", tmp_path / "stale.json")
    assert proc.returncode == 1 and "differs" in proc.stdout, proc.stdout + proc.stderr


TREE = {
    "miles/__init__.py": "",
    "miles/utils/__init__.py": "",
    "miles/utils/arguments.py": """
import os
from typing import TYPE_CHECKING

from .helper import helper_fn

if TYPE_CHECKING:
    import typed_only

try:
    import deep_ep
except ImportError:
    deep_ep = None

try:
    import swallowed_pkg
except Exception:
    swallowed_pkg = None

def parse_args():
    from miles.utils.lazy import lazy_fn
    return lazy_fn()

def resolve_rollout_function_paths(args):
    return "miles.rollout.default.generate"
""",
    "miles/utils/helper.py": """
import torch.distributed as dist
from megatron.training import get_args

def helper_fn():
    pass
""",
    "miles/utils/lazy.py": "import lazy_dep.sub\n\ndef lazy_fn():\n    pass\n",
    "miles/utils/unreached.py": "import never_reached\n",
    "miles/ray/__init__.py": "",
    "miles/ray/placement_group.py": """
import ray
from ..utils import arguments

def create_placement_groups(args): ...
def create_rollout_manager(args, pg): ...
async def create_training_models(args, pgs, rollout_manager): ...
""",
    "miles/ray/rollout_manager.py": """
class RolloutManager:
    def start(self):
        import rollout_dep
""",
    "miles/ray/router_manager.py": """
def start_router(args):
    from sglang_router.launch_router import launch_router
    return launch_router(args)
""",
    "miles/rollout/__init__.py": "",
    "miles/rollout/default.py": "import aiohttp\n\ndef generate(args):\n    pass\n",
    "miles/backends/__init__.py": "",
    "miles/backends/fsdp_utils/__init__.py": """
try:
    import optional_dep
except (RuntimeError, ModuleNotFoundError):
    optional_dep = None
""",
    "miles/backends/fsdp_utils/actor.py": """
import importlib

from . import parallel
from miles_plugins.hooks import install

if __name__ == "__main__":
    import main_only

def load():
    return importlib.import_module("literal_dep")
""",
    "miles/backends/fsdp_utils/parallel.py": "import a.b.c\nimport a\n",
    "miles/backends/megatron_utils/actor.py": """
from megatron.training.global_vars import get_args
from miles.no_such_module import thing

def _install():
    import installed_dep

_install()
""",
    "miles_plugins/__init__.py": "",
    "miles_plugins/hooks.py": "from ..miles import x\nimport plugin_dep\n\ndef install():\n    pass\n",
    "tests/test_x.py": "import test_only\n",
}


def _tree(root, files=TREE):
    git_init(root)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tree")
    return root, git(root, "rev-parse", "HEAD").stdout.strip()


def test_the_rules_on_a_small_tree(tmp_path):
    root, commit = _tree(tmp_path / "tree")
    data = msi.derive(*msi.read_source(root))
    assert data["miles_commit"] == commit
    paths = data["start_paths"]
    driver = paths["driver"]
    assert driver["entries"] == ["miles.ray.placement_group", "miles.utils.arguments"]  # no train.py: the launcher
    assert driver["imports"] == {
        "lazy_dep.sub": {"eager": False, "importers": ["miles.utils.lazy"]},  # reached through a function's import
        "megatron.training": {"eager": True, "importers": ["miles.utils.helper"]},  # transitive, `from .helper`
        "ray": {"eager": True, "importers": ["miles.ray.placement_group"]},
        "swallowed_pkg": {"eager": True, "importers": ["miles.utils.arguments"]},  # `except Exception`: counted
        "torch.distributed": {"eager": True, "importers": ["miles.utils.helper"]},
    }
    assert driver["optional"] == {"deep_ep": ["miles.utils.arguments"]}
    assert driver["miles_modules"] == 7  # its packages' __init__ included; unreached.py is not
    fsdp = paths["fsdp_actor"]
    assert fsdp["entries"] == ["miles.backends.fsdp_utils.actor"]
    assert fsdp["imports"] == {
        "a.b.c": {"eager": True, "importers": ["miles.backends.fsdp_utils.parallel"]},  # `from . import parallel`
        "a": {"eager": True, "importers": ["miles.backends.fsdp_utils.parallel"]},
        "literal_dep": {"eager": False, "importers": ["miles.backends.fsdp_utils.actor"]},
        "plugin_dep": {"eager": True, "importers": ["miles_plugins.hooks"]},
    }
    assert fsdp["optional"] == {"optional_dep": ["miles.backends.fsdp_utils"]}  # a tuple naming the error
    assert fsdp["unresolved"] == {}  # `from ..miles import` above the top package is no miles module
    megatron = paths["megatron_actor"]
    assert megatron["imports"] == {
        "installed_dep": {"eager": True, "importers": ["miles.backends.megatron_utils.actor"]},  # called at import
        "megatron.training.global_vars": {"eager": True, "importers": ["miles.backends.megatron_utils.actor"]},
    }
    assert megatron["unresolved"] == {"miles.no_such_module": ["miles/backends/megatron_utils/actor.py:3"]}
    rollout = paths["rollout"]
    assert rollout["entries"] == ["miles.ray.rollout_manager", "miles.rollout.default"]  # the default by its path
    assert set(rollout["imports"]) == {"aiohttp", "rollout_dep"}
    assert list(paths["router"]["imports"]) == ["sglang_router.launch_router"]
    assert paths["router"]["imports"]["sglang_router.launch_router"]["eager"] is False
    union = data["union"]
    for absent in ("os", "typing", "importlib", "typed_only", "main_only", "never_reached", "test_only", "miles"):
        assert absent not in union
    assert union["megatron.training"]["paths"] == ["driver"]
    assert data["gate"] == sorted(set(union) - {"a", "megatron.training"})  # each covered by a deeper name
    assert data["gate"] == msi.reduced(list(union))
    assert data["gate_eager"] == [  # megatron.training goes in its deeper name; the lazy ones are left out
        "a.b.c",
        "aiohttp",
        "installed_dep",
        "megatron.training.global_vars",
        "plugin_dep",
        "ray",
        "swallowed_pkg",
        "torch.distributed",
    ]


def test_a_tarball_and_the_root_scripts(tmp_path):
    files = dict(TREE, **{"train.py": "import ray\nfrom miles.rollout import default\n", "docs/conf.py": "x = 1\n"})
    root, commit = _tree(tmp_path / "tree", files)
    tarball = tmp_path / "miles.tar.gz"
    git(root, "archive", "--format=tar.gz", "--prefix=miles/", "-o", str(tarball), "HEAD")
    data = msi.derive(*msi.read_source(tarball))
    assert data == msi.derive(*msi.read_source(root))
    assert data["miles_commit"] == commit
    driver = data["start_paths"]["driver"]
    assert driver["entries"] == ["train"]
    assert set(driver["imports"]) == {"ray", "aiohttp"}
    out = tmp_path / "out.json"
    assert _cli("--source", tarball, "-o", out).returncode == 0
    assert out.read_text() == msi.render(data) and json.loads(out.read_text()) == data
    assert _cli("--source", tarball, "--check", out).returncode == 0


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = _cli("--source", tmp_path / "nowhere")
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0 and "nowhere" in missing.stderr
    root, _ = _tree(tmp_path / "tree", {k: v for k, v in TREE.items() if k != "miles/ray/router_manager.py"})
    proc = _cli("--source", root)
    assert proc.returncode == 2 and "start path router: no miles module defines start_router" in proc.stderr
    plain = tmp_path / "plain"
    shutil.copytree(root, plain, ignore=shutil.ignore_patterns(".git"))
    proc = _cli("--source", plain)
    assert proc.returncode == 2 and "not a git checkout" in proc.stderr


@pytest.mark.parametrize("text", ["def broken(:\n", "import x\nif True\n"])
def test_a_start_module_that_does_not_parse_is_named(tmp_path, text):
    root, _ = _tree(tmp_path / "tree", dict(TREE, **{"miles/utils/lazy.py": text}))
    proc = _cli("--source", root)
    assert proc.returncode == 2 and "miles/utils/lazy.py:" in proc.stderr, proc.stderr
