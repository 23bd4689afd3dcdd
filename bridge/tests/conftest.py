"""Test set-up: the bridge under test is this tree's; on the CPU, Triton kernels run in the interpreter, which must be
chosen before triton is imported (the GPU tests in gpu/ run where a GPU is and set it to 0 before this file runs)."""

import importlib.machinery
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("SGLANG_ATTN_BRIDGE_FORWARD", "auto")

import pytest  # noqa: E402
import sglang_attn_bridge  # noqa: E402
import torch  # noqa: E402

TREE = Path(__file__).resolve().parents[1] / "src" / "sglang_attn_bridge"
IMPORTED = Path(sglang_attn_bridge.__file__).resolve().parent


def _installed_copy_problem(installed: Path) -> str:
    """'' when `installed` holds exactly this tree's modules, byte for byte, else the first difference."""
    if installed == TREE:
        return f"it is this tree's {TREE}, not an installed copy"
    mine = {p.relative_to(TREE) for p in TREE.rglob("*.py")}
    theirs = {p.relative_to(installed) for p in installed.rglob("*.py")}
    if mine != theirs:
        return f"its modules differ from the tree's: {sorted(map(str, mine ^ theirs))[:3]}"
    changed = [str(p) for p in sorted(mine) if (TREE / p).read_bytes() != (installed / p).read_bytes()]
    return f"{changed[0]} differs from the tree's" if changed else ""


# SGLANG_ATTN_BRIDGE_UNDER_TEST=installed: the suite judges the bridge as an image installs it (a wheel built from
# this tree, on the path instead of bridge/src: `-o pythonpath=tests`), and refuses anything but a faithful copy.
if os.environ.get("SGLANG_ATTN_BRIDGE_UNDER_TEST") == "installed":
    _problem = _installed_copy_problem(IMPORTED)
    if _problem:
        raise pytest.UsageError(f"SGLANG_ATTN_BRIDGE_UNDER_TEST=installed: the imported bridge {IMPORTED}: {_problem}")
elif IMPORTED != TREE:
    raise pytest.UsageError(
        f"the imported sglang_attn_bridge is {sglang_attn_bridge.__file__}, not this tree's {TREE}: put bridge/src "
        "first on the path (pytest.ini does, from the repository root)"
    )


@pytest.fixture
def bridge_settings(monkeypatch):
    """use(**changes): the bridge's settings with `changes` for the rest of the test (restored after it)."""
    import dataclasses

    from sglang_attn_bridge import settings

    def use(**changes):
        monkeypatch.setattr(settings, "_current", dataclasses.replace(settings.current(), **changes))

    return use


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def no_sglang(monkeypatch):
    """Resolution sees no sglang, whatever the machine has installed (tests that need one install a fake)."""
    from sglang_attn_bridge import probe, settings, sglang_resolution

    monkeypatch.setattr(
        sglang_resolution, "_cached", sglang_resolution.Resolution(None, False, "disabled for the test")
    )
    probe.clear()  # probe decisions belong to one test's (fake) sglang
    with settings.override(probe_cache=None):
        yield


SGLANG_MODULES = (
    "sglang.srt.layers.attention.triton_ops.extend_attention",  # <= 0.5.14
    "sglang.kernels.ops.attention.extend_attention",
)  # 0.5.23+


@pytest.fixture
def install_sglang(monkeypatch):
    """install(module_name, fn): a throwaway sglang whose `module_name` holds fn as extend_attention_fwd_unified
    (the other generation's path fails to import); resolution and probe decisions start afresh."""
    from sglang_attn_bridge import probe, sglang_resolution

    def install(module_name, fn):
        parts = module_name.split(".")
        for i in range(1, len(parts)):
            name = ".".join(parts[:i])
            pkg = types.ModuleType(name)
            pkg.__path__ = []
            pkg.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
            monkeypatch.setitem(sys.modules, name, pkg)
        mod = types.ModuleType(module_name)
        mod.__spec__ = importlib.machinery.ModuleSpec(module_name, None)
        mod.extend_attention_fwd_unified = fn
        monkeypatch.setitem(sys.modules, module_name, mod)
        for other in SGLANG_MODULES:
            if other != module_name:
                monkeypatch.setitem(sys.modules, other, None)  # importing the other path raises ModuleNotFoundError
        monkeypatch.setattr(sglang_resolution, "_cached", None)
        probe.clear()

    return install
