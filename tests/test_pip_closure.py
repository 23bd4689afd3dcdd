"""A GPU variant's whole environment, resolved as one set (toolkit/lock/pip_closure.py).

The resolver is the real uv, against a real index server on 127.0.0.1 holding real wheel files; the pair check reads
the same wheels' metadata. Each case is a breaker the whole environment showed: a pin outside another package's
bound, a global override that silences a third package's requirement, an override that drops an extra."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from local_servers import LocalIndex, wheel_file
from support import MEGATRON_SNAPSHOT, SNAPSHOT, no_engine, one_line, run_build_py

from toolkit.errors import SpecError, UsageError
from toolkit.lock import file as lock_file
from toolkit.lock import pip_closure, pip_index
from toolkit.spec.catalog import load_catalog

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed (requirements-dev.txt)")
CATALOG = load_catalog()
TAG = "py3-none-any"
AMD = "linux/amd64"


@pytest.fixture
def index(monkeypatch, tmp_path):
    idx = LocalIndex()
    monkeypatch.setenv("PIP_INDEX_URL", idx.url)
    bridge = tmp_path / "pyproject.toml"  # the bridge's own torch, triton and transformers are not on this index
    bridge.write_text('[project]\nname = "bridge"\ndependencies = []\n')
    monkeypatch.setattr(pip_closure, "BRIDGE", bridge)
    yield idx
    idx.server.stop()


def publish(index, name, version, requires=()):
    filename, body = wheel_file(name, version, TAG, requires=requires)
    index.add(name, filename, body)


def variant(pins: dict, allow=(), name="cu13-x86"):
    """A variant (cu13-x86 unless named) reduced to one pip step of `pins`, with the given allow rules and no trees
    to read."""
    v = CATALOG.resolve(name)
    steps = ({"kind": "pip", "value": list(pins), "flags": ["no-deps"]},)
    gates = dict(v.gates, pip_check={"allow": [dict(zip(("distribution", "requirement", "reason"), a)) for a in allow]})
    return dataclasses.replace(v, steps=steps, pip=dict(pins), gates=gates)


def lock(v):
    """What `lock` records for the variant's linux/amd64 closure (UsageError on a conflict)."""
    idx = pip_index.host_index()
    no_base = dataclasses.replace(pip_closure.bases.load_base(v.base), distributions={})
    orig = pip_closure.bases.load_base
    pip_closure.bases.load_base = lambda ref: no_base  # the base's recorded distributions are not on this index
    try:
        v = dataclasses.replace(v, platforms=[AMD])
        return pip_closure.lock_variant(v, {}, pip_closure.Trees(), idx, None)
    finally:
        pip_closure.bases.load_base = orig


def test_a_set_that_resolves_is_recorded_with_every_file_hash(index):
    publish(index, "energon", "7.2.2", ["msc>=0.18,<0.26"])
    publish(index, "msc", "0.25.0")
    rec = lock(variant({"energon": "7.2.2", "msc": "0.25.0"}))
    packages = rec["py3.12 linux/amd64"]["packages"]
    assert {n: p["version"] for n, p in packages.items()} == {"energon": "7.2.2", "msc": "0.25.0"}
    assert all(len(sha) == 64 for p in packages.values() for sha in p["files"].values())


def test_a_pin_outside_another_packages_bound_fails_naming_both(index):
    publish(index, "energon", "7.2.2", ["msc>=0.18,<0.26"])
    publish(index, "msc", "0.51.0")
    with pytest.raises(UsageError, match=r"energon.* depend on msc>=0\.18,<0\.26.*msc==0\.51\.0"):
        lock(variant({"energon": "7.2.2", "msc": "0.51.0"}))


def test_an_allow_rule_excuses_its_own_pair_and_no_other(index):
    """The rule (sglang, cutlass) becomes an override, which uv applies to every package: the pair check still
    fails quack's own requirement on cutlass, which no rule names."""
    publish(index, "sglang", "0.5.16", ["cutlass==4.6.0"])
    publish(index, "quack", "0.6.5", ["cutlass>=4.7"])
    publish(index, "cutlass", "4.6.2")
    pins = {"sglang": "0.5.16", "quack": "0.6.5", "cutlass": "4.6.2"}
    rule = ("sglang", "cutlass", "4.6.2 over 4.6.0")
    with pytest.raises(UsageError, match=r"quack 0\.6\.5 has requirement cutlass>=4\.7, but you have cutlass 4\.6\.2"):
        lock(variant(pins, allow=[rule]))
    publish(index, "quack", "0.6.4", ["cutlass>=4.6"])
    rec = lock(variant(dict(pins, quack="0.6.4"), allow=[rule]))
    assert rec["py3.12 linux/amd64"]["packages"]["cutlass"]["version"] == "4.6.2"


def test_an_override_keeps_the_extra_of_the_requirement_it_excuses(index):
    publish(index, "sglang", "0.5.16", ["cutlass[cu13]==4.6.0"])
    publish(index, "cutlass", "4.6.2", ['cutlass-libs-cu13==4.6.2; extra == "cu13"'])
    publish(index, "cutlass-libs-cu13", "4.6.2")
    rec = lock(variant({"sglang": "0.5.16", "cutlass": "4.6.2"}, allow=[("sglang", "cutlass", "4.6.2 over 4.6.0")]))
    assert "cutlass-libs-cu13" in rec["py3.12 linux/amd64"]["packages"]


def test_a_base_torch_no_record_versions_is_left_out_of_the_resolve(index):
    """A ROCm base's torch is its own build, on no index the resolve reads, at a version no record says: the
    index's torch (another build, which brings triton and CUDA's libraries) must never enter the closure. It and
    the base's other unrecorded distributions are dropped from the resolve, and a requirement on them is met by
    the base's."""
    publish(index, "torch", "2.11.0", ["triton==3.6.0", "nvidia-cublas==13.1"])
    publish(index, "triton", "3.6.0")
    publish(index, "nvidia-cublas", "13.1")
    publish(index, "fla", "0.4.2", ["torch>=2.5", "einops"])
    publish(index, "einops", "0.8.1")
    (rec,) = lock(variant({"fla": "0.4.2"}, name="rocm720-mi35x")).values()
    assert set(rec["packages"]) == {"fla", "einops"}
    assert {"torch", "triton", "sgl-kernel", "tilelang"} <= set(rec["base_left"])
    # The rule keys on the base's torch alone: a CUDA base's torch is recorded, so it still resolves from the index.
    (cuda,) = lock(variant({"fla": "0.4.2"})).values()
    assert "torch" in cuda["packages"] and "base_left" not in cuda


def test_left_to_base_follows_the_base_torch_record():
    rocm = pip_closure.bases.load_base(CATALOG.resolve("rocm720-mi35x").base)
    cuda = pip_closure.bases.load_base(CATALOG.resolve("cu12-x86").base)
    assert rocm.torch_version is None and cuda.torch_version is not None
    left = pip_closure.left_to_base(rocm, rocm.unrecorded)
    assert {"torch", "triton", "sgl-kernel", "tilelang"} <= set(left)
    assert pip_closure.left_to_base(cuda, cuda.unrecorded) == {}


def test_a_requirement_on_a_distribution_left_to_the_base_is_met_by_it():
    closure = {"fla": {"version": "0.4.2", "files": {}}}
    metas = {"fla": "Name: fla\nRequires-Dist: torch>=2.5\nRequires-Dist: einops\n"}
    conflicts, allowed = pip_closure.check_pairs(closure, metas, ["fla"], [], "3.10", AMD, left={"torch": "the base's"})
    assert conflicts == ["fla 0.4.2 requires einops, which is not installed."]
    assert allowed == ["fla 0.4.2 requires torch>=2.5: left to the base (the base's)"]


def test_a_dropped_extra_is_a_missing_requirement():
    closure = {n: {"version": v, "files": {}} for n, v in (("sglang", "0.5.16"), ("cutlass", "4.6.2"))}
    metas = {
        "sglang": "Name: sglang\nRequires-Dist: cutlass[cu13]==4.6.0\n",
        "cutlass": 'Name: cutlass\nRequires-Dist: cutlass-libs-cu13==4.6.2; extra == "cu13"\n',
    }
    rule = pip_closure.AllowRule("sglang", ("cutlass",), "4.6.2 over 4.6.0")
    conflicts, allowed = pip_closure.check_pairs(closure, metas, ["sglang==0.5.16"], [rule], "3.12", AMD)
    assert conflicts == ["cutlass 4.6.2 requires cutlass-libs-cu13, which is not installed."]
    assert len(allowed) == 1 and "allowed: 4.6.2 over 4.6.0" in allowed[0]


def test_markers_are_read_for_the_targets_python_and_machine():
    closure = {"a": {"version": "1", "files": {}}}
    metas = {
        "a": 'Name: a\nRequires-Dist: b; python_version < "3.11"\nRequires-Dist: c; platform_machine == "aarch64"\n'
    }
    assert pip_closure.check_pairs(closure, metas, ["a"], [], "3.12", AMD) == ([], [])
    conflicts, _ = pip_closure.check_pairs(closure, metas, ["a"], [], "3.12", "linux/arm64")
    assert conflicts == ["a 1 requires c, which is not installed."]


def test_a_hand_edited_closure_is_refused_naming_the_key():
    good = {"cu13-x86": {"py3.12 linux/amd64": {"packages": {"a": {"version": "1", "files": {"a.whl": "0" * 64}}}}}}
    lock = {"schema": 1, "family": "cuda", "sources": {}, "artifacts": {}, "closure": good}
    lock_file.check(lock, "images/cuda.lock.json", "cuda")
    bad = {"cu13-x86": {"py3.12 linux/amd64": {"packages": {"a": {"version": "1", "files": {"a.whl": "zz"}}}}}}
    with pytest.raises(SpecError, match=r"closure\.cu13-x86\.py3\.12 linux/amd64\.packages\.a\.files\.a\.whl"):
        lock_file.check(dict(lock, closure=bad), "images/cuda.lock.json", "cuda")


def test_a_requirements_file_is_read_as_requirements_only():
    text = "accelerate\nblake3==1.0.9  # why\n# comment\nnvidia-resiliency-ext~=0.6.0; platform_system == 'Linux'\n"
    assert pip_closure.requirement_lines(text, exclude=["nvidia-resiliency-ext"]) == ["accelerate", "blake3==1.0.9"]
    with pytest.raises(ValueError, match="option line"):
        pip_closure.requirement_lines("--extra-index-url https://example.invalid/simple\n")


def test_the_image_installs_what_the_spec_asks_for_not_what_only_the_base_brings():
    """A CUDA 12 base's torch comes from PyTorch's CUDA 12 index; the index's torch brings CUDA 13 libraries,
    which only torch asks for: the image leaves torch and those to the base."""
    record = {
        "packages": {
            "torch": {"version": "2.11.0", "files": {}, "via": ["(base)", "sglang"]},
            "nvidia-cublas": {"version": "13", "files": {}, "via": ["torch"]},
            "sglang": {"version": "0.5.16", "files": {}, "via": ["(spec)"]},
            "numpy": {"version": "2", "files": {}, "via": ["sglang", "torch"]},
            "energon": {"version": "7.2.2", "files": {}, "via": ["(spec)"]},
            "msc": {"version": "0.25.0", "files": {}, "via": ["energon"]},
        }
    }
    assert pip_closure.installs(record) == ["energon", "msc", "numpy", "sglang"]


def _edit_lock(project_copy, edit):
    path = project_copy / "images" / "cuda.lock.json"
    lock = json.loads(path.read_text())
    edit(lock)
    path.write_text(json.dumps(lock))
    return path.read_bytes()


def test_a_closure_for_the_wrong_platform_is_refused_before_anything_is_written(project_copy, tmp_path):
    def to_arm(lock):
        lock["closure"]["cu13-x86"] = {"py3.12 linux/arm64": lock["closure"]["cu13-x86"]["py3.12 linux/amd64"]}

    before = _edit_lock(project_copy, to_arm)
    proc = run_build_py(
        "render", "--target", "cu13-x86", "-o", "out.Dockerfile", cwd=project_copy, env=no_engine(tmp_path)
    )
    one_line(
        proc, 2, "cuda.lock.json: closure.cu13-x86: holds py3.12 linux/arm64; the variant builds py3.12 linux/amd64"
    )
    assert not (project_copy / "out.Dockerfile").exists()
    assert (project_copy / "images" / "cuda.lock.json").read_bytes() == before


def test_a_corrupt_closure_digest_is_refused_naming_the_file(project_copy, tmp_path):
    def corrupt(lock):
        pkg = lock["closure"]["cu13-x86"]["py3.12 linux/amd64"]["packages"]["absl-py"]
        pkg["files"] = {name: "not-a-digest" for name in pkg["files"]}

    _edit_lock(project_copy, corrupt)
    proc = run_build_py("render", "--target", "cu13-x86", cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "closure.cu13-x86.py3.12 linux/amd64.packages.absl-py.files.absl_py-2.3.1-py3-none-any.whl")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cu13-x86", "cu12-x86", "rocm720-mi35x"])
def test_a_gpu_variants_whole_environment_resolves_on_the_real_index(name):
    """The spec as committed, against the package index this host reaches and the upstream snapshots: it resolves,
    every rule-excused conflict is the rule's own pair, and every pin a step names is in the set at its version
    (msc under energon's bound, sglang's tilelang, quack and cudnn-frontend that accept cutlass-dsl 4.6.2). On ROCm
    the base's own torch, triton and kernels stay out of the set."""
    v = CATALOG.resolve(name)
    trees = pip_closure.Trees({"miles": SNAPSHOT, "megatron_lm": MEGATRON_SNAPSHOT})
    idx = pip_index.host_index()
    spec = pip_closure.ROOT / "images" / f"{v.family}.yaml"
    lock = lock_file.load(lock_file.lock_path(spec), f"{v.family}.lock.json", v.family)
    (record,) = pip_closure.lock_variant(v, lock["pip"], trees, idx, idx.cafile).values()
    packages = record["packages"]
    for use in pip_index.pin_uses(v):  # the pins the variant's steps install
        if f"{use.name}=={use.version}" not in record["pending"]:
            assert packages[use.project]["version"] == use.version, use.name
    if v.family == "rocm":
        assert not {"torch", "triton", "sglang", "sgl-kernel"} & set(packages)
        assert not [n for n in packages if n.startswith(("nvidia-cu", "nvidia-nccl", "nvidia-nvjitlink"))]
    else:
        assert "nvidia-cutlass-dsl-libs-cu13" in packages  # the override kept sglang's [cu13] extra


def test_a_base_distribution_no_record_versions_is_left_to_the_base():
    """A CUDA 12.9 base's triton is its torch's (no record says which): the bridge's unpinned `triton` must not
    replace it with the index's newest."""
    record = {
        "packages": {
            "bridge-dep": {"version": "1", "files": {}, "via": ["(spec)"]},
            "triton": {"version": "3.9.0", "files": {}, "via": ["(spec)", "bridge-dep"]},
        },
        "base_unknown": ["triton"],
    }
    assert pip_closure.installs(record) == ["bridge-dep"]
