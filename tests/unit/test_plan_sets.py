"""`--set KEY=VALUE`: a dotted override of one resolved value, validated like the spec itself, that leaves the
variant it was given (the catalog's) as it was."""

from __future__ import annotations

import pytest

from toolkit.errors import SpecError, UsageError
from toolkit.plan.build_plan import apply_sets

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def test_no_sets_is_the_variant_itself(demo):
    assert apply_sets(demo["a"], []) is demo["a"]


def test_a_dotted_key_replaces_one_value_and_keeps_its_siblings(demo):
    v = apply_sets(demo["b"], ["args.MAX_JOBS=16", "env.EXTRA=1", "base=debian:13.1"])
    assert v.args == {"MAX_JOBS": "16", "GPU_ARCH": "gfx950"}
    assert v.env == {"MODE": "plain", "EXTRA": "1"} and v.base == "debian:13.1"
    assert (v.name, v.tag_suffix, v.pip) == ("b", "bee", demo["b"].pip)


def test_platforms_are_a_comma_list(demo):
    assert apply_sets(demo["a"], ["platforms=linux/amd64,linux/arm64"]).platforms == ("linux/amd64", "linux/arm64")


def test_a_component_is_changed_key_by_key(demo):
    v = apply_sets(demo["a"], ["components.lib.git=https://example.com/org/fork.git", f"components.lib.ref={COMMIT}"])
    assert v.components["lib"] == {"git": "https://example.com/org/fork.git", "ref": COMMIT}
    assert set(v.components) == {"lib"}


def test_a_component_no_step_installs_is_refused(demo):
    with pytest.raises(SpecError, match=r"components\.extra: no step installs it"):
        apply_sets(
            demo["a"], ["components.extra.git=https://example.com/org/extra.git", f"components.extra.ref={COMMIT}"]
        )


def test_the_variant_given_is_left_as_it_was(demo):
    """The catalog's variant is shared (tests, bake loops): neither an accepted nor a refused --set may change it."""
    a = demo["a"]
    before = (a.digest, dict(a.args), dict(a.pip), {k: dict(c) for k, c in a.components.items()})
    assert apply_sets(a, ["args.MAX_JOBS=1", f"components.lib.ref={COMMIT}"]).args["MAX_JOBS"] == "1"
    with pytest.raises(SpecError):
        apply_sets(a, ["pip.torch=latest"])
    assert (a.digest, a.args, a.pip, a.components) == before


USAGE_CASES = [
    (
        "not settable",
        "gates.imports=x",
        "--set 'gates.imports=x': expected KEY=VALUE with KEY one of base, args, env, pip, components, tag_suffix, "
        "platforms (dotted)",
    ),
    (
        "no value",
        "args.MAX_JOBS",
        "--set 'args.MAX_JOBS': expected KEY=VALUE with KEY one of base, args, env, pip, components, tag_suffix, "
        "platforms (dotted)",
    ),
    ("into a scalar", "base.tag=1", "--set 'base.tag=1': base is not a mapping"),
    ("into a value", "args.GPU_ARCH.x=1", "--set 'args.GPU_ARCH.x=1': GPU_ARCH is not a mapping"),
]


@pytest.mark.parametrize("item,message", [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_a_malformed_set_is_a_usage_error(demo, item, message):
    with pytest.raises(UsageError) as e:
        apply_sets(demo["a"], [item])
    assert str(e.value) == message and not isinstance(e.value, SpecError)


SPEC_CASES = [
    (
        "latest base",
        "base=debian:latest",
        "base: unpinned base image 'debian:latest': 'latest' moves; name a fixed tag or a digest",
    ),
    ("unpinned pip", "pip.torch=*", "pip.torch: pip package must be pinned to an exact version, got '*'"),
    ("nested value", "args.X.Y=1", "args.X: expected a string, got dict {'Y': '1'}"),
    ("platform", "platforms=linux/amd64,windows/amd64", "platforms[1]: unknown platform 'windows/amd64'"),
    (
        "tag",
        "tag_suffix=a b",
        "tag_suffix: not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 115 characters): 'a b'",
    ),
]


@pytest.mark.parametrize("item,message", [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_a_set_value_is_validated_like_the_spec(demo, item, message):
    with pytest.raises(SpecError) as e:
        apply_sets(demo["a"], [item])
    assert str(e.value) == f"--set (images/demo.yaml variants.a): {message}"
