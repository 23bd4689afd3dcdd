"""What the GPU families' steps must hold on every variant, read from the resolved specs (no render, no engine).

- every kernel whose setup.py downloads a prebuilt wheel unless told not to is built with its FORCE_BUILD variable.
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
