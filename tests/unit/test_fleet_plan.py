"""The fleet's decisions without an engine: what a builder may be asked, the buildx arguments it gets, the
per-platform wheelhouse recipes, and upstream's tag names (the fleet tier, tests/test_fleet.py, runs them)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from toolkit.engine import builders
from toolkit.errors import SpecError, UsageError
from toolkit.plan import wheelhouse
from toolkit.plan.build_plan import make_plan
from toolkit.spec.catalog import load_catalog
from toolkit.spec.upstream_tags import upstream_tags

CLASSIC = builders.Builder(None, "docker", None, containerd_store=False)
CONTAINERD = builders.Builder("fleet-b", "docker", "unix:///tmp/b.sock", containerd_store=True)
REMOTE = builders.Builder("fleet", "remote")
TWO = ("linux/amd64", "linux/arm64")


def test_classic_store_refuses_two_platforms_and_cache_export():
    with pytest.raises(UsageError, match=r"one platform at a time; linux/amd64,linux/arm64 needs the containerd"):
        builders.check(CLASSIC, TWO, push=True, cache_export=False)
    with pytest.raises(UsageError, match="cannot export cache; use --cache-from"):
        builders.check(CLASSIC, ("linux/amd64",), push=False, cache_export=True)
    builders.check(CLASSIC, ("linux/amd64",), push=False, cache_export=False)  # the default build


def test_what_lives_only_in_a_registry_needs_push():
    with pytest.raises(UsageError, match="several platforms exists only in a registry: add --push"):
        builders.check(CONTAINERD, TWO, push=False, cache_export=True)
    with pytest.raises(UsageError, match="built by builder fleet .remote driver. exists only in a registry"):
        builders.check(REMOTE, ("linux/amd64",), push=False, cache_export=False)
    builders.check(CONTAINERD, TWO, push=True, cache_export=True)
    builders.check(CONTAINERD, ("linux/amd64",), push=False, cache_export=True)  # lands in engine B
    assert builders.pushes_itself(CONTAINERD, TWO) and builders.pushes_itself(REMOTE, ("linux/amd64",))
    assert not builders.pushes_itself(CONTAINERD, ("linux/amd64",))


def test_builder_names_are_checked_before_buildx_sees_them():
    for bad in ("-x", "a b", "x" * 65, "../up"):
        with pytest.raises(UsageError, match="not a builder name"):
            builders.resolve(bad)


def test_buildx_arguments_of_a_fleet_build():
    plan = make_plan(load_catalog().resolve("smoke"))
    contexts = (("miles-base:t", "docker-image://127.0.0.1:5000/miles-base@sha256:" + "a" * 64),)
    site = builders.site(CONTAINERD, plan, contexts, "127.0.0.1:5000/cache", None)
    assert site.docker == ("--context", "fleet-b")  # a docker context builds as the current context only
    assert builders.site(REMOTE, plan, (), None, None).args() == ["--builder", "fleet"]
    assert site.args() == [
        "--build-context", f"miles-base:t={contexts[0][1]}",
        "--cache-from", "type=registry,ref=127.0.0.1:5000/cache:smoke",
        "--cache-to", "type=registry,ref=127.0.0.1:5000/cache:smoke,mode=max",
        "--provenance=false",
    ]  # fmt: skip
    imports_only = builders.site(CLASSIC, plan, (), None, "127.0.0.1:5000/cache").args()
    assert imports_only == ["--cache-from", "type=registry,ref=127.0.0.1:5000/cache:smoke"]


def test_an_image_the_containerd_store_keeps_comes_back_as_an_archive_with_rewritten_times():
    """Only there: the classic store ignores rewrite-timestamp, and a push goes from the builder with provenance."""
    plan = make_plan(load_catalog().resolve("smoke"))
    kept = builders.site(CONTAINERD, plan, (), None, None)
    assert kept.output("/b/x") == ("--output", "type=oci,dest=/b/x/image.oci.tar,rewrite-timestamp=true")
    assert kept.args()[-1] == "--provenance=false"  # an attestation's build times would change every digest
    pushed = dataclasses.replace(kept, push=("127.0.0.1:5000/miles:smoke",))
    assert pushed.output("/b/x") == () and "--provenance=mode=max" in pushed.args()
    classic = builders.site(CLASSIC, plan, (), None, None)
    assert classic.output("/b/x") == () and classic.args() == []
    assert builders.site(REMOTE, plan, (), None, None).output("/b/x") == ()
    arm = make_plan(load_catalog().resolve("smoke-arm64"))  # a variant also reads its family default's cache
    assert builders.site(CLASSIC, arm, (), None, "r/c").cache_from == (
        "type=registry,ref=r/c:smoke-arm64",
        "type=registry,ref=r/c:smoke",
    )


def test_each_platform_has_its_own_wheels_and_names():
    smoke = load_catalog().resolve("smoke")
    assert wheelhouse.home_platform(smoke) == "linux/amd64"
    assert wheelhouse.recipe(smoke) == ("manylinux_2_36_x86_64", "smoke.constraints.txt")
    assert wheelhouse.recipe(smoke, "linux/arm64") == ("manylinux_2_36_aarch64", "smoke.constraints.arm64.txt")
    home, arm = wheelhouse.image_ref(smoke), wheelhouse.image_ref(smoke, "linux/arm64")
    assert arm == home + "-arm64" and home.startswith("miles-wheelhouse:smoke-")
    cpu = load_catalog().resolve("miles-cpu")
    with pytest.raises(UsageError, match="wheelhouse.other_platforms has no wheels for 'linux/arm64'"):
        wheelhouse.recipe(cpu, "linux/arm64")


def test_upstream_tag_names():
    at = datetime(2026, 12, 2, 4, 7, tzinfo=UTC)
    c = load_catalog()
    assert upstream_tags(c.resolve("cu13"), "dev", now=at) == ["radixark/miles:dev", "radixark/miles:dev-202612020407"]
    assert upstream_tags(c.resolve("cu12-x86"), "latest") == ["radixark/miles:latest-cu12"]
    assert upstream_tags(c.resolve("cu12-x86"), "custom", "v0.1.0") == ["radixark/miles:v0.1.0-cu12"]
    assert upstream_tags(c.resolve("rocm700-mi30x"), "dev", now=at) == [
        "rocm/sgl-dev:miles-rocm700-mi30x",
        "rocm/sgl-dev:miles-rocm700-mi30x-202612020407",
    ]
    with pytest.raises(UsageError, match="--image-tag custom needs --custom-tag"):
        upstream_tags(c.resolve("cu13"), "custom")
    with pytest.raises(UsageError, match="has no upstream_tags for miles-cpu"):
        upstream_tags(c.resolve("miles-cpu"), "dev")


def test_tag_names_do_not_change_the_image():
    c = load_catalog()
    v = c.resolve("cu13")
    assert v.upstream_tags and "upstream_tags" not in v.as_dict()


@pytest.mark.parametrize(
    "family,mutate,message",
    [
        (
            "cuda",
            lambda d: d["upstream_tags"]["postfix"].update({"cu99": "-x"}),
            "images/cuda.yaml: upstream_tags.postfix.cu99: no such variant",
        ),
        (
            "cuda",
            lambda d: d["upstream_tags"].update(dev_prefix="dev;rm"),
            "images/cuda.yaml: upstream_tags.dev_prefix: not a tag word (letters, digits, '_.-'): 'dev;rm'",
        ),
        (
            "cuda",
            lambda d: d["upstream_tags"].update(image="Radixark/Miles:dev"),
            "images/cuda.yaml: upstream_tags.image: not an image name (no tag): 'Radixark/Miles:dev'",
        ),
        (
            "smoke",
            lambda d: d["wheelhouse"]["other_platforms"].update({"linux/s390x": {"platform": "x"}}),
            "images/smoke.yaml: wheelhouse.other_platforms.linux/s390x: unknown platform 'linux/s390x'",
        ),
    ],
)
def test_fleet_spec_data_is_checked(images_dir, family, mutate, message):
    from support import edited_spec

    edited_spec(images_dir, family, mutate)
    with pytest.raises(SpecError) as e:
        load_catalog(images_dir)
    assert str(e.value) == message
