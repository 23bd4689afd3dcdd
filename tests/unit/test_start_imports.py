"""The GPU families gate what miles imports on its start paths (toolkit/spec/start_imports.py over the derived file)."""

from __future__ import annotations

import json

import pytest

from toolkit.errors import SpecError
from toolkit.lock.pip_index import gpu_variants
from toolkit.spec import start_imports
from toolkit.spec.catalog import ROOT, load_catalog, read_family

CATALOG = load_catalog()
DERIVED = json.loads((ROOT / "images" / "miles-start-imports.json").read_text())["gate"]
GPU = gpu_variants(CATALOG)
# What miles' Megatron actor, rollout and router manager import at start that no hand list gated before.
START = [
    "megatron.training.training",
    "megatron.training.arguments",
    "megatron.bridge.training.config",
    "torch_memory_saver.utils",
    "ray.util.placement_group",
    "sglang_router.launch_router",
]


def _gated(gates) -> dict:
    out = {m: "imports" for m in gates.get("imports", [])}
    out.update({m: "gpu_imports" for m in gates.get("gpu_imports", [])})
    return out


@pytest.mark.parametrize("variant", GPU, ids=lambda v: v.name)
def test_every_derived_module_is_gated_or_named_with_its_reason(variant):
    gated = _gated(variant.gates)
    family, _ = read_family(ROOT / variant.spec_file)
    named = family["gates"]["start_imports"]["elsewhere"]
    for module in DERIVED:
        assert module in gated or named[module]["gate"] == "none", (variant.name, module)
    for module in START:
        assert gated.get(module) == "imports", (variant.name, module)


def test_an_exception_the_derivation_no_longer_names_is_refused():
    gates = {
        "start_imports": {
            "file": "images/miles-start-imports.json",
            "elsewhere": {"no.such.module": {"gate": "none", "why": "stale"}},
        }
    }
    with pytest.raises(SpecError, match=r"no longer derives this module"):
        start_imports.expand(gates, "images/x.yaml", "gates")


def test_an_exception_without_a_reason_or_a_known_gate_is_refused():
    # stub_imports is no route: every import runs against the family's declared stub
    for rule in ({"gate": "none"}, {"gate": "elsewhere", "why": "x"}, "none", {"gate": "stub_imports", "why": "x"}):
        gates = {"start_imports": {"file": "images/miles-start-imports.json", "elsewhere": {DERIVED[0]: rule}}}
        with pytest.raises(SpecError, match=r"expected \{gate: "):
            start_imports.expand(gates, "images/x.yaml", "gates")


def test_a_file_outside_the_repository_or_not_derived_is_refused(tmp_path):
    with pytest.raises(SpecError):
        start_imports.expand({"start_imports": {"file": "../etc/passwd"}}, "images/x.yaml", "gates")
    with pytest.raises(SpecError, match=r"not a derived-imports file"):
        start_imports.expand({"start_imports": {"file": "images/cuda.lock.json"}}, "images/x.yaml", "gates")
