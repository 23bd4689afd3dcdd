"""`pip check` in the GPU images must pass a correct image: every conflict that follows from the spec's own pins is
allowed, with a reason, and nothing else is.

The CUDA bases carry sglang installed from its tag's pyproject, whose requirements are the PyPI wheel's; a spec pin
that the base's sglang metadata rules out is a conflict `pip check` will print, so it must have an allow rule. The
wheels come from .cache/sglang-wheels (downloaded when missing, skipped with the reason when impossible).
"""

from __future__ import annotations

import re
import zipfile

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import sglang_wheel

from toolkit.spec.bases import load_base
from toolkit.spec.catalog import load_catalog
from verify.config import from_dict
from verify.kinds.pip_check import PipLine

CATALOG = load_catalog()
# The CUDA bases' interpreter (their base file, images/bases/) and platform, for evaluating requirement markers.
_PY = load_base(CATALOG.resolve("cu13-x86").base).python_version
CUDA_ENV = dict(
    default_environment(),
    python_version=_PY,
    python_full_version=_PY + ".0",
    sys_platform="linux",
    platform_system="Linux",
    platform_machine="x86_64",
    extra="",
)


def _base_version(variant) -> str:
    return re.search(r":v(\d+\.\d+\.\d+)", variant.base).group(1)


def _metadata_requirements(version):
    with zipfile.ZipFile(sglang_wheel(version)) as zf:
        text = zf.read("sglang-%s.dist-info/METADATA" % version).decode()
    reqs = [
        Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines() if line.startswith("Requires-Dist:")
    ]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(CUDA_ENV)]


def _pins(variant) -> dict:
    """{canonical name: version} of what the spec installs by exact version."""
    return {canonicalize_name(Requirement(name).name): version for name, version in variant.pins().items()}


def _allowed(variant, line: str) -> bool:
    """Whether the variant's allow rules excuse this `pip check` line, judged by the runner's own matcher."""
    (rules,) = from_dict(variant.gates)["pip_check"]
    return any(rule.matches(PipLine.parse(line)) for rule in rules)


def conflicts(variant) -> list:
    """The `pip check` lines the spec's pins force against the base's sglang metadata."""
    version, pins, out = _base_version(variant), _pins(variant), []
    for req in _metadata_requirements(version):
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is not None and req.specifier and not req.specifier.contains(pinned, prereleases=True):
            out.append("sglang %s has requirement %s, but you have %s %s." % (version, req, req.name, pinned))
    return out


@pytest.mark.parametrize("name", sorted(n for n, v in CATALOG.variants.items() if v.family == "cuda"))
def test_every_forced_conflict_is_allowed(name):
    variant = CATALOG.variants[name]
    found = conflicts(variant)
    assert found, "expected the cutlass-dsl/flashinfer/tilelang pins to conflict with sglang's metadata"
    missing = [line for line in found if not _allowed(variant, line)]
    assert not missing, "pip check would fail a correct image: %s" % missing


def test_an_unallowed_pin_is_caught():
    """The check can fail: pin something sglang's metadata rules out, without a rule."""
    import dataclasses

    variant = CATALOG.variants["cu13-x86"]
    bad = dataclasses.replace(variant, pip=dict(variant.pip, torch="2.9.0"))
    assert [line for line in conflicts(bad) if not _allowed(bad, line)] == [
        "sglang 0.5.16 has requirement torch==2.11.0, but you have torch 2.9.0."
    ]


@pytest.mark.parametrize("name", sorted(n for n, v in CATALOG.variants.items() if v.family in ("rocm", "cuda")))
def test_excluded_requirements_are_allowed(name):
    variant = CATALOG.variants[name]
    for req in variant.components["miles"].get("exclude", []):
        assert _allowed(variant, "miles 0.1.0 requires %s, which is not installed" % req), req


def _metadata_lines(version) -> list:
    with zipfile.ZipFile(sglang_wheel(version)) as zf:
        text = zf.read("sglang-%s.dist-info/METADATA" % version).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


# The requirements that ask for CUDA 13 builds. (sglang 0.5.16 also writes humming-kernels[cu13], an extra
# humming-kernels 0.1.10's own metadata does not declare: it brings nothing, so it needs no rewrite.)
CUDA13_ONLY = re.compile(r"cuda-python>=13|flashinfer_python\[cu13\]|nvidia-cutlass-dsl\[cu13\]")


def test_cuda12_installs_sglang_miles_with_cuda12_requirements():
    """sglang's manifest is CUDA 13's; on cu12 the step's own rewrites (the same literal text in the manifest and in
    the wheel's Requires-Dist) leave no CUDA 13 requirement for `pip check` to hold against a CUDA 12 image."""
    variant = CATALOG.resolve("cu12-x86")
    (step,) = [s for s in variant.steps if s.get("pyproject_replace")]
    lines = _metadata_lines(_base_version(variant))
    assert [line for line in lines if CUDA13_ONLY.search(line)], "the CUDA 13 manifest names CUDA 13 requirements"
    for old, new in step["pyproject_replace"].items():
        assert any(old in line for line in lines), old  # every rewrite still matches the manifest's text
        lines = [line.replace(old, new) for line in lines]
    assert [line for line in lines if CUDA13_ONLY.search(line)] == []
    assert "cuda-python>=12,<13" in lines
