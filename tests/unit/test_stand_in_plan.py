"""What a stand-in build of a GPU variant skips and what it keeps (toolkit/plan/stand_in.py), on the real specs."""

import pytest

from toolkit.errors import UsageError
from toolkit.plan.stand_in import SUFFIX, plan_stand_in, stand_in_variant, step_name
from toolkit.spec.catalog import load_catalog
from toolkit.steps import applies
from verify.stand_in import parse

SOURCES = {"miles", "megatron_lm"}


@pytest.fixture(scope="module")
def cu13():
    return load_catalog().resolve("cu13-x86")


def skipped(stand_in) -> dict:
    return {s.step: s for s in stand_in.skipped}


def test_compiling_steps_unfetched_sources_and_pending_pins_are_skipped(cu13):
    found = skipped(plan_stand_in(cu13, SOURCES))
    assert found["pip flash-attn"].why.startswith("compiles native code")
    assert found["source apex"].why.startswith("git checkout apex not fetched")
    assert "flashinfer-cubin==0.6.15.post1" in found["pip flashinfer-python,flashinfer-cubin,flashinfer-jit-cache"].why
    assert "source megatron_lm" not in found and "requirements miles" not in found  # their sources are given
    assert "pip nvidia-modelopt" not in found and "closure" not in found  # locked pins from the index build here


def test_a_step_is_skipped_for_its_source_until_it_is_given(cu13):
    assert "source megatron_lm" in skipped(plan_stand_in(cu13, {"miles"}))
    assert "requirements miles" in skipped(plan_stand_in(cu13, {"megatron_lm"}))


def test_compile_names_a_step_that_then_builds_and_an_unknown_name_is_refused(cu13):
    found = skipped(plan_stand_in(cu13, SOURCES, ["transformer-engine-torch"]))
    assert not any(name.startswith("pip transformer-engine") for name in found)
    assert "pip flash-attn" in found
    with pytest.raises(UsageError, match="--compile 'nope'.*no compiling step of cu13-x86.*pip flash-attn"):
        plan_stand_in(cu13, SOURCES, ["nope"])


def test_a_component_build_the_closure_holds_from_the_index_is_a_difference(cu13):
    stand_in = plan_stand_in(cu13, SOURCES)
    rules = stand_in.gate_rules()
    assert any(r["distributions"] == ["sglang-router"] for r in rules["differs"])
    assert not any(r.get("step") == "cargo sgl_router" for r in rules["not_built"])
    assert parse(rules, "gates.json") == rules  # the runner's own schema takes it
    assert all(r["modules"] or r["distributions"] for section in rules.values() for r in section)
    assert not any(r.get("step") == "make nccl_tests" for r in rules["not_built"])  # it installs no module
    # sglang-miles' tree over the base's sglang: on the stand-in, the index's sglang the base set holds stays
    with_base = plan_stand_in(cu13, SOURCES, (), {"sglang", "torch"}).gate_rules()
    assert any(r["modules"] == ["sglang"] and "source sglang_miles" in r["why"] for r in with_base["differs"])
    assert any(r["modules"] == ["sglang"] for r in rules["not_built"])  # without it, nothing holds sglang


def test_the_variant_built_drops_exactly_the_skipped_steps_and_ends_its_tag_in_standin(cu13):
    stand_in = plan_stand_in(cu13, SOURCES)
    v = stand_in_variant(cu13, stand_in)
    names = [step_name(s, v.args) for s in v.steps if applies(s, v.args)]
    assert not set(names) & {s.step for s in stand_in.skipped}
    kept = [step_name(s, cu13.args) for s in cu13.steps if applies(s, cu13.args)]
    assert names == [n for n in kept if n not in {s.step for s in stand_in.skipped}]
    assert v.tag_suffix == "cu13-x86" + SUFFIX and v.gates["stand_in"] == stand_in.gate_rules()
    assert "stand_in" not in cu13.gates  # the real variant is untouched


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--stand-in-base", "--push"], "no --push, --registry or --image-tag"),
        (["--stand-in-base", "--registry", "localhost:5000/x"], "no --push, --registry or --image-tag"),
        (["--compile", "pip flash-attn"], "--compile needs --stand-in-base"),
        (["--stand-in-base", "--tag", "miles:cu13-x86"], "a stand-in build's tag ends in -standin"),
        (["--stand-in-base", "--compile", "nope"], "no compiling step of cu13-x86 is named so"),
    ],
)
def test_the_cli_refuses_a_stand_in_build_that_could_leave_this_engine_or_names_nothing(tmp_path, args, needle):
    """Exit 2 and one line before any engine is asked (none serves here)."""
    from tests.support import no_engine, one_line, run_build_py

    one_line(run_build_py("build", "--target", "cu13-x86", *args, env=no_engine(tmp_path)), 2, needle)


@pytest.mark.parametrize(
    "target, needle",
    [("smoke", "makes its own base"), ("rocm720-mi35x", "a ROCm variant, whose torch is its base's own")],
)
def test_a_variant_with_no_stand_in_is_refused(tmp_path, target, needle):
    from tests.support import no_engine, one_line, run_build_py

    one_line(run_build_py("build", "--target", target, "--stand-in-base", env=no_engine(tmp_path)), 2, needle)


def test_provides_is_not_part_of_the_closure_key(cu13):
    """`provides` only names modules for a stand-in's gates: adding one leaves the locked closure current."""
    from dataclasses import replace

    from toolkit.lock.pip_closure import spec_key

    steps = tuple(dict(s, provides=["x"]) if s["kind"] == "pip" else s for s in cu13.steps)
    assert spec_key(replace(cu13, steps=steps)) == spec_key(cu13)
    assert spec_key(replace(cu13, steps=steps[:-1])) != spec_key(cu13)
