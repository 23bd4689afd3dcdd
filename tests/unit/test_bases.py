"""The GPU base files (images/bases/): one per base a GPU variant builds FROM, every fact with its record, and a
malformed file refused with one line naming the file and the key."""

from __future__ import annotations

import shutil

import pytest
import yaml

from toolkit.errors import SpecError, UsageError
from toolkit.spec.bases import BASES_DIR, all_bases, file_name, load_base, load_file
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
GPU = sorted(n for n, v in CATALOG.variants.items() if v.template == "gpu.Dockerfile.j2")
BASES = all_bases()


def _facts(node, prefix=""):
    """Every fact ({value, record}) of a base file's mapping, by dotted key."""
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and set(value) == {"value", "record"}:
            yield dotted, value
        elif isinstance(value, dict):
            yield from _facts(value, dotted + ".")


def test_there_are_gpu_variants_and_base_files():
    assert len(GPU) >= 7 and {v.family for v in map(CATALOG.variants.get, GPU)} == {"cuda", "rocm"}
    assert len(BASES) == len({CATALOG.variants[n].base for n in GPU})


@pytest.mark.parametrize("name", GPU)
def test_every_gpu_variant_has_its_base_file_and_its_platforms(name):
    variant = CATALOG.variants[name]
    base = load_base(variant.base)
    assert base.image == variant.base
    assert set(variant.platforms) <= set(base.platforms), (variant.platforms, base.platforms)
    assert (variant.family == "rocm") == base.is_rocm
    if variant.family == "rocm":
        assert base.archs is not None and variant.args["GPU_ARCH"] in base.archs


@pytest.mark.parametrize("image", sorted(BASES))
def test_every_fact_names_its_record(image):
    path = BASES_DIR / file_name(image)
    facts = dict(_facts(yaml.safe_load(path.read_text())))
    assert len(facts) > 20
    assert set(facts) == set(BASES[image].records)
    for key, fact in facts.items():
        assert fact["record"].strip(), key
        if fact["value"] is None:  # nothing recorded: the record says what was searched
            assert fact["record"].startswith(("none found", "a CUDA base", "a ROCm base", "PyPI", "upstream")), key


def test_the_typed_accessors_read_the_facts():
    cuda, rocm = BASES["lmsysorg/sglang:v0.5.16"], BASES["lmsysorg/sglang:v0.5.10-rocm700-mi30x"]
    assert (cuda.python_version, cuda.python, cuda.torch_version, cuda.torch_cuda) == (
        "3.12",
        "python3",
        "2.11.0",
        "13.0",
    )
    assert cuda.distributions["sglang-kernel"] == "0.4.5" and "flashinfer-cubin" not in cuda.distributions  # null
    assert cuda.cuda_home == "/usr/local/cuda" and cuda.rocm_path is None
    assert (rocm.python_version, rocm.site_packages) == ("3.10", "/opt/venv/lib/python3.10/site-packages")
    assert rocm.sglang_pyproject == "python/pyproject_other.toml" and rocm.archs == ("gfx942",)


@pytest.mark.parametrize("name", GPU)
def test_a_patch_into_site_packages_names_the_recorded_folder(name):
    variant = CATALOG.variants[name]
    base = load_base(variant.base)
    for patch in variant.patches:
        tree = patch.get("tree", "")  # a `package:` patch finds its folder in the image
        if base.site_packages and ("site-packages" in tree or "dist-packages" in tree):
            assert tree == base.site_packages or tree.startswith(base.site_packages + "/"), (tree, base.site_packages)


def test_an_image_without_a_base_file_is_a_usage_error():
    with pytest.raises(UsageError, match=r"^no base file for lmsysorg/sglang:v9: expected lmsysorg-sglang-v9.yaml"):
        load_base("lmsysorg/sglang:v9")


GOOD = "lmsysorg-sglang-v0.5.16.yaml"


def _edit(raw: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    node = raw
    for part in parents:
        node = node[part]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value


@pytest.mark.parametrize(
    "key,value,where,problem",
    [
        ("python.version.record", "  ", "python.version.record", "empty: every fact names its public record"),
        ("torch.cuda.record", KeyError, "torch.cuda", "missing required key 'record'"),
        ("python.version.value", "3", "python.version.value", "expected MAJOR.MINOR, got '3'"),
        ("python.command.value", "python3; rm -rf /", "python.command.value", "not an absolute normalised path"),
        ("platforms.value", ["linux/s390x"], "platforms.value[0]", "not a platform: 'linux/s390x'"),
        ("cuda.home.value", "usr/local/cuda", "cuda.home.value", "not an absolute normalised path"),
        ("torch.version.value", 2.11, "torch.version.value", "expected a string or null, got float 2.11"),
        ("distributions.Flash_Infer", {"value": "1.0", "record": "x"}, "distributions.Flash_Infer", "canonical"),
        ("sglang.colour", {"value": None, "record": "x"}, "sglang.colour", "unknown key"),
        ("sglang", KeyError, "sglang", "missing required key"),
        ("rocm", {"version": {"value": "7.0", "record": "x"}}, "cuda", "exactly one of `cuda`"),
        ("image", "lmsysorg/sglang:v0.5.17", "image", "is named 'lmsysorg-sglang-v0.5.17.yaml'"),
        ("digest.value", "sha256:abc", "digest.value", "expected sha256:<64 hex>"),
    ],
)
def test_a_malformed_base_file_is_one_line_naming_file_and_key(tmp_path, key, value, where, problem):
    raw = yaml.safe_load((BASES_DIR / GOOD).read_text())
    _edit(raw, key, value)
    path = tmp_path / GOOD
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(SpecError) as e:
        load_file(path)
    message = str(e.value)
    assert message.startswith(f"{path}: {where}: ") and problem in message, message
    assert "\n" not in message


def test_the_loader_refuses_what_the_yaml_reader_refuses(tmp_path):
    shutil.copy(BASES_DIR / GOOD, tmp_path / GOOD)
    text = (tmp_path / GOOD).read_text()
    (tmp_path / GOOD).write_text(text + "image: lmsysorg/sglang:v0.5.16\n")  # a duplicate key
    with pytest.raises(SpecError, match="duplicate key 'image'"):
        all_bases(tmp_path)


def test_the_project_files_load_unchanged_from_a_copy(tmp_path):
    for path in BASES_DIR.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    copied = all_bases(tmp_path)
    assert {k: v.records for k, v in copied.items()} == {k: v.records for k, v in BASES.items()}
