"""Rendering: golden Dockerfiles for every target (a template change is a reviewed golden diff), determinism."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import ROOT, run_build_py

from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

GOLDEN = Path(__file__).parent / "golden"
TARGETS = sorted(load_catalog().variants)


@pytest.mark.parametrize("target", TARGETS)
def test_rendered_dockerfile_matches_golden(target):
    text = render(make_plan(load_catalog().resolve(target), revision="golden"))
    golden = GOLDEN / f"{target}.Dockerfile"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file for {target}: run UPDATE_GOLDEN=1 pytest tests/test_render.py"
    assert text == golden.read_text(), f"{target}: rendered Dockerfile differs from {golden.relative_to(ROOT)}"


@pytest.mark.parametrize("target", ["rocm", "cuda", "smoke"])
def test_render_is_byte_identical_across_runs(tmp_path, target):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_build_py("render", "--target", target, "-o", str(a)).returncode == 0
    assert run_build_py("render", "--target", target, "-o", str(b)).returncode == 0
    assert a.read_bytes() == b.read_bytes()


def test_no_overlay_or_zero_context_patching_in_any_target():
    for target in TARGETS:
        text = render(make_plan(load_catalog().resolve(target), revision="x"))
        assert "--unidiff-zero" not in text and "|| true" not in text, target
        assert "/tmp/sglang-attn-bridge" in text  # the bridge is installed as a package


def test_gate_is_the_last_build_step():
    for target in TARGETS:
        text = render(make_plan(load_catalog().resolve(target), revision="x"))
        runs = [ln for ln in text.splitlines() if ln.startswith("RUN ")]
        assert "source=gates" in runs[-1], target


def test_bridge_is_installed_late_after_everything_heavy():
    text = render(make_plan(load_catalog().resolve("rocm"), revision="x"))
    assert text.index("/tmp/sglang-attn-bridge") > text.index("/root/miles")
    assert text.index("/tmp/sglang-attn-bridge") > text.index("Megatron-LM")


def test_set_overrides_are_validated_and_rendered():
    variant = load_catalog().resolve("rocm")
    text = render(make_plan(variant, sets=["args.GPU_ARCH=gfx942"], revision="x"))
    assert 'ARG GPU_ARCH="gfx942"' in text
    proc = run_build_py("render", "--target", "rocm", "--set", "base=rocm/sgl-dev:latest")
    assert proc.returncode == 2 and "unpinned base image 'rocm/sgl-dev:latest'" in proc.stderr
    proc = run_build_py("render", "--target", "rocm", "--set", "nonsense=1")
    assert proc.returncode == 2 and "--set 'nonsense=1'" in proc.stderr


def test_rendering_does_not_depend_on_the_host_ca():
    variant = load_catalog().resolve("cuda")
    with_ca = render(make_plan(variant, pip_ca="/etc/ssl/certs/ca-certificates.crt", revision="x"))
    without = render(make_plan(variant, revision="y"))
    assert with_ca == without
