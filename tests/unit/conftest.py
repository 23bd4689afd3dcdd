"""A small spec family for unit tests: every inherited and overridden field in a few lines, loaded from images/."""

from __future__ import annotations

import pytest

from toolkit.spec.catalog import load_family

COMMIT = "0123456789abcdef0123456789abcdef01234567"

# The template, patches and gates are the project's own: a spec's files must exist in the repository.
DEMO = f"""\
family: demo
description: a family for tests
template: cpu.Dockerfile.j2
repository: miles
default: a
alias: dm
python: /opt/venv/bin/python
source_date_epoch: 1787049764
base: debian:12
platforms: [linux/amd64]
args: {{MAX_JOBS: "8", GPU_ARCH: gfx942}}
env: {{MODE: plain}}
pip: {{torch: 2.13.0}}
components:
  lib: {{git: https://example.com/org/lib.git, ref: {COMMIT}}}
steps: [{{pip: [torch]}}, {{source: lib}}, patches]
gates: {{imports: [sglang_attn_bridge], platform: cpu, pip_check: {{allow: []}},
        commands: [{{name: bridge-attention, argv: ["{{python}}", probes/bridge_attention.py]}}]}}
variants:
  a: {{}}
  b:
    description: the other one
    base: debian:13
    args: {{GPU_ARCH: gfx950}}
    platforms: [linux/arm64]
    tag_suffix: bee
"""


@pytest.fixture
def demo_text():
    """The demo family's YAML (tests edit it as text: conftest modules are not importable by name)."""
    return DEMO


@pytest.fixture
def write_spec(images_dir):
    """write_spec(text, name="demo") -> the path `images/NAME.yaml` holding `text`."""

    def write(text: str, name: str = "demo"):
        path = images_dir / f"{name}.yaml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def demo(write_spec):
    """The demo family's variants by name."""
    return load_family(write_spec(DEMO))
