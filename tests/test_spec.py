"""Spec validation: every class of error gives one line `FILE: KEY: problem`, exit 2, and writes nothing.

Each class is checked in-process, on an edited copy of the one spec file; the CLI contract (exit 2, the line on
stderr, nothing written) once, through build.py on a copy of the project."""

from __future__ import annotations

import pytest
from support import ROOT, edited_spec, run_build_py

from toolkit.errors import SpecError, UsageError
from toolkit.spec.catalog import load_catalog

CASES = [
    (
        "unknown key",
        "rocm",
        lambda d: d["variants"]["rocm700-mi30x"].update(bse="x:1"),
        "images/rocm.yaml: variants.rocm700-mi30x.bse: unknown key",
    ),
    (
        "wrong type",
        "rocm",
        lambda d: d["variants"]["rocm700-mi30x"].update(args=["GPU_ARCH=gfx942"]),
        "images/rocm.yaml: variants.rocm700-mi30x.args: expected a mapping, got list",
    ),
    (
        "wrong scalar type",
        "cuda",
        lambda d: d["args"].update(MAX_JOBS=64),
        "images/cuda.yaml: args.MAX_JOBS: expected a string, got int 64",
    ),
    (
        "latest base",
        "rocm",
        lambda d: d["variants"]["rocm700-mi30x"].update(base="lmsysorg/sglang:latest"),
        "images/rocm.yaml: variants.rocm700-mi30x.base: unpinned base image 'lmsysorg/sglang:latest': "
        "'latest' moves; name a fixed tag or a digest",
    ),
    (
        "untagged base",
        "cuda",
        lambda d: d["variants"]["cu12-x86"].update(base="lmsysorg/sglang"),
        "images/cuda.yaml: variants.cu12-x86.base: unpinned base image 'lmsysorg/sglang': name a tag or a digest",
    ),
    ("missing base", "rocm", lambda d: d.pop("base"), "images/rocm.yaml: base: missing required key"),
    (
        "branch instead of commit",
        "rocm",
        lambda d: d["components"]["miles"].update(ref="main"),
        "images/rocm.yaml: components.miles.ref: git component must be pinned to a 40-hex commit, got 'main'",
    ),
    (
        "unpinned pip",
        "cuda",
        lambda d: d["pip"].update(tilelang="latest"),
        "images/cuda.yaml: pip.tilelang: pip package must be pinned to an exact version, got 'latest'",
    ),
    (
        "bad platform",
        "cuda",
        lambda d: d["variants"]["cu13"].update(platforms=["linux/s390x"]),
        "images/cuda.yaml: variants.cu13.platforms[0]: unknown platform 'linux/s390x'",
    ),
    (
        "default names no variant",
        "rocm",
        lambda d: d.update(default="rocm999"),
        "images/rocm.yaml: default: names no variant: 'rocm999'",
    ),
    (
        "gate platform",
        "rocm",
        lambda d: d["gates"].update(platform="metal"),
        "images/rocm.yaml: gates.platform: must be one of rocm|cuda|cpu, got 'metal'",
    ),
]


@pytest.mark.parametrize("label,family,mutate,message", CASES, ids=[c[0] for c in CASES])
def test_invalid_spec_is_one_spec_error_line(images_dir, label, family, mutate, message):
    edited_spec(images_dir, family, mutate)
    with pytest.raises(SpecError) as e:
        load_catalog(images_dir)
    assert str(e.value) == message


def test_invalid_spec_is_exit_2_one_line_and_writes_nothing(project_copy):
    """The CLI contract, once: any bad spec refuses every target (here a rocm error stops a smoke render)."""
    _, family, mutate, message = next(c for c in CASES if c[0] == "latest base")
    edited_spec(project_copy / "images", family, mutate)
    out = project_copy / "Dockerfile.out"
    proc = run_build_py("render", "--target", "smoke", "-o", str(out), cwd=project_copy)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"build.py: {message}"] and not proc.stdout
    assert not out.exists()
    assert not (project_copy / "build").exists()


def test_invalid_yaml_names_file_and_line(images_dir):
    text = (ROOT / "images" / "smoke.yaml").read_text()
    (images_dir / "smoke.yaml").write_text(text + "\nvariants: [unclosed\n")
    with pytest.raises(SpecError, match=r"^images/smoke\.yaml: line \d+: invalid YAML"):
        load_catalog(images_dir)


def test_family_must_match_file_name(images_dir):
    edited_spec(images_dir, "smoke", lambda d: d.update(family="other"))
    with pytest.raises(SpecError, match="^images/smoke.yaml: family: must match the file name 'smoke', got 'other'$"):
        load_catalog(images_dir)


def test_variants_inherit_and_override():
    catalog = load_catalog()
    mi30 = catalog.resolve("rocm700-mi30x")
    mi35 = catalog.resolve("rocm720-mi35x")
    assert mi30.args["GPU_ARCH"] == "gfx942" and mi35.args["GPU_ARCH"] == "gfx950"
    assert mi30.args["MAX_JOBS"] == mi35.args["MAX_JOBS"]  # inherited
    assert mi30.base == "lmsysorg/sglang:v0.5.10-rocm700-mi30x"
    assert catalog.resolve("cu13").platforms == ("linux/amd64", "linux/arm64")
    assert catalog.resolve("cu12-x86").args["CUDA_MAJOR"] == "12"
    assert mi30.digest != mi35.digest


def test_aliases_resolve_to_default_variants():
    catalog = load_catalog()
    assert catalog.resolve("rocm").name == "rocm720-mi35x"
    assert catalog.resolve("cuda").name == "cu13-x86"
    assert catalog.resolve("smoke").name == "smoke"
    with pytest.raises(UsageError, match="unknown target 'rocm9'"):
        catalog.resolve("rocm9")


def test_every_variant_gates_the_bridge():
    for v in load_catalog().variants.values():
        assert "sglang_attn_bridge" in v.gates["imports"]
        if v.family in ("rocm", "cuda"):
            gated = v.gates["imports"] + v.gates.get("gpu_imports", [])
            for mod in ("miles.backends.fsdp_utils", "miles.backends.megatron_utils", "sglang", "sgl_kernel"):
                assert mod in gated, (v.name, mod)
