"""What the staged context holds (context_files) and the labels a build applies (build_labels): pure functions of
the plan and the project tree, so the input hash can be computed without staging anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import ROOT

from toolkit.plan.build_plan import make_plan
from toolkit.plan.sources import LABEL_PREFIX, remote
from toolkit.render.context import INPUT_HASH_LABEL, Context, build_labels, context_files
from toolkit.spec.catalog import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_every_entry_is_a_project_file_in_sorted_order(catalog):
    files = context_files(make_plan(catalog.resolve("rocm"), revision="r"))
    assert list(files) == sorted(files)
    for rel, src in files.items():
        assert src.is_file() and src.resolve().is_relative_to(ROOT), rel


def test_the_gate_runner_and_the_bridge_without_build_leftovers(catalog):
    files = context_files(make_plan(catalog.resolve("smoke"), revision="r"))
    gates = {rel: src for rel, src in files.items() if rel.startswith("gates/")}
    assert "gates/verify/__main__.py" in gates  # the gate step runs `python3 -m verify` from gates/
    assert all(src.resolve().is_relative_to(ROOT / "verify") for src in gates.values()), gates
    bridge = [rel for rel in files if rel.startswith("bridge/")]
    assert bridge and "bridge/pyproject.toml" in bridge
    for rel in bridge:
        parts = rel.split("/")
        assert not {"tests", "bench", "build", "__pycache__"} & set(parts) and not rel.endswith(".pyc"), rel
        assert not any(p.endswith(".egg-info") for p in parts), rel


def test_a_variant_adds_exactly_its_patches_by_file_name(catalog):
    smoke = context_files(make_plan(catalog.resolve("smoke"), revision="r"))
    rocm_plan = make_plan(catalog.resolve("rocm"), revision="r")
    rocm = context_files(rocm_plan)
    assert rocm_plan.variant.patches
    assert {k: v for k, v in rocm.items() if k not in smoke} == {
        f"patches/{Path(p['file']).name}": ROOT / p["file"] for p in rocm_plan.variant.patches
    }


def test_build_labels_add_the_hash_and_each_source_sorted(demo, tmp_path):
    plan = make_plan(demo["a"], revision="abc")
    lib = remote("lib", demo["a"].components["lib"])
    ctx = Context(path=tmp_path, dockerfile=tmp_path / "Dockerfile", input_hash="ab" * 32, sources=(lib,))
    labels = build_labels(plan, ctx)
    assert labels == {
        **plan.labels,
        INPUT_HASH_LABEL: "ab" * 32,
        LABEL_PREFIX + "lib": "https://example.com/org/lib.git#" + demo["a"].components["lib"]["ref"],
    }
    assert list(labels) == sorted(labels)
    assert INPUT_HASH_LABEL not in plan.labels  # the plan's own labels are left alone
    assert ctx.short_hash == "ab" * 6
