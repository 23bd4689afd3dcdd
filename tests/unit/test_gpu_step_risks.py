"""What the GPU families' steps must hold on every variant, read from the resolved specs (no render, no engine).

- every kernel whose setup.py downloads a prebuilt wheel unless told not to is built with its FORCE_BUILD variable;
- what upstream uninstalls before it installs its own copy is uninstalled here too, before the step that installs it.
"""

from __future__ import annotations

import pytest

from toolkit.spec.catalog import load_catalog
from toolkit.steps import applies

CATALOG = load_catalog()
GPU_VARIANTS = sorted(n for n, v in CATALOG.variants.items() if v.family in ("cuda", "rocm"))

# A pip pin or component whose setup.py fetches a prebuilt wheel from GitHub unless this variable says to compile.
FORCE_BUILD = {
    "flash-attn": "FLASH_ATTENTION_FORCE_BUILD",
    "flash_attention": "FLASH_ATTENTION_FORCE_BUILD",
    "fast_hadamard_transform": "FAST_HADAMARD_TRANSFORM_FORCE_BUILD",
    "causal-conv1d": "CAUSAL_CONV1D_FORCE_BUILD",
    "mamba-ssm": "MAMBA_FORCE_BUILD",
}


def steps_of(name: str) -> list[dict]:
    v = CATALOG.resolve(name)
    return [s for s in v.steps if applies(s, v.args)]


def installs(step: dict) -> list[str]:
    if step["kind"] == "pip":
        return [n.split("[")[0] for n in step["value"]]
    return [step["value"]] if step["kind"] == "source" else []


@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_every_kernel_that_would_download_a_wheel_is_forced_to_build(name):
    for step in steps_of(name):
        for what in installs(step):
            if what in FORCE_BUILD and not step.get("prebuilt"):
                assert step.get("env", {}).get(FORCE_BUILD[what]) == "TRUE", (name, what)


# Upstream's uninstalls before it installs its own copy (docker/Dockerfile line 128, docker/Dockerfile.rocm line 95),
# per family: the distributions, and the package whose install step must come after them.
UPSTREAM_UNINSTALLS = {
    "cuda": (
        {"transformer-engine", "transformer-engine-cu12", "transformer-engine-cu13", "transformer-engine-torch"},
        "transformer-engine",
    ),
    "rocm": ({"transformer-engine", "transformer_engine", "transformer_engine_torch"}, "transformer_engine"),
}


@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_what_upstream_uninstalls_goes_before_the_step_that_replaces_it(name):
    wanted, installed_by = UPSTREAM_UNINSTALLS[CATALOG.resolve(name).family]
    steps = steps_of(name)
    install_at = next(i for i, s in enumerate(steps) if installed_by in installs(s))
    removed = set().union(*(set(s["value"]) for s in steps[:install_at] if s["kind"] == "pip_uninstall"))
    assert wanted <= removed, (name, sorted(wanted - removed))


# Trees upstream removes (or resets) before it puts its own there (docker/Dockerfile.rocm lines 120 and 127,
# docker/Dockerfile line 206's `checkout -f`): the step that copies ours in replaces what the base has at that path.
UPSTREAM_REPLACED_TREES = {
    "cuda": {"/sgl-workspace/sglang"},
    "rocm": {"/root/Megatron-LM", "/sgl-workspace/sglang"},
}


@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_trees_upstream_removes_first_are_replaced_here(name):
    for path in UPSTREAM_REPLACED_TREES[CATALOG.resolve(name).family]:
        (step,) = [s for s in steps_of(name) if s["kind"] == "source" and s.get("into") == path]
        assert step.get("replace") is True, (name, path)
