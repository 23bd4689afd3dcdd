"""Kernels are never compiled under emulation by accident: a build or bake of a variant whose steps compile, for a
platform its builder runs only through QEMU, is refused before anything runs (exit 2, one line). No engine: the
decision reads the builder's platforms as `docker buildx inspect` prints them."""

from __future__ import annotations

import pytest

from build import parser
from toolkit.engine import builders
from toolkit.errors import UsageError
from toolkit.request import BuildRequest
from toolkit.spec.catalog import load_catalog
from toolkit.steps import compiling_steps

CATALOG = load_catalog()
X86_WITH_QEMU = """\
Name:          default
Driver:        docker
Last Activity: 2026-12-07 03:40:10 +0000 UTC

Nodes:
Name:             default
Endpoint:         default
Status:           running
BuildKit version: v0.0.0+unknown
Platforms:        linux/amd64, linux/amd64/v2, linux/amd64/v3, linux/arm64, linux/386
"""
# A builder with a node of each architecture (`docker buildx create --append`), each listing QEMU's after its own.
TWO_NODES = """\
Name:   fleet
Driver: remote

Nodes:
Name:      fleet0
Endpoint:  tcp://x86:1234
Platforms: linux/amd64*, linux/amd64/v2, linux/arm64, linux/386
Name:      fleet1
Endpoint:  tcp://arm:1234
Platforms: linux/arm64*, linux/arm/v7, linux/amd64
"""


def test_a_node_runs_its_first_platform_natively_and_emulates_the_rest():
    assert builders.native_platforms(X86_WITH_QEMU) == ("linux/amd64", "linux/386")
    assert builders.native_platforms(TWO_NODES) == ("linux/amd64", "linux/386", "linux/arm64", "linux/arm")
    assert builders.native_platforms("Name: x\nDriver: kubernetes\n") == ()  # no node up: not known


def test_the_engines_architecture_is_its_native_platform():
    assert builders.native_of("x86_64") == ("linux/amd64", "linux/386")
    assert builders.native_of("aarch64") == ("linux/arm64", "linux/arm")
    assert builders.native_of("mystery") == ()


def test_cu13_compiles_its_kernels_for_arm64_on_an_x86_builder_and_is_refused():
    cu13 = CATALOG.resolve("cu13")
    compiling = compiling_steps(cu13)
    assert "flash-attn" in compiling and "apex" in compiling
    line = builders.emulation_problem("cu13", compiling, cu13.platforms, ("linux/amd64", "linux/386"), "default")
    assert line is not None and "\n" not in line
    assert line.startswith("cu13 compiles kernels (flash-attn, flash_attention, fast_hadamard_transform and ")
    assert "for linux/arm64, which builder default only emulates" in line and "--builder NAME" in line


def test_a_native_builder_for_every_platform_is_not_refused():
    cu13 = CATALOG.resolve("cu13")
    native = builders.native_platforms(TWO_NODES)
    assert builders.emulation_problem("cu13", compiling_steps(cu13), cu13.platforms, native, "fleet") is None


def test_only_compiling_steps_count():
    smoke = CATALOG.resolve("smoke")  # its two-platform manifest is built under QEMU on purpose (the fleet tier)
    assert compiling_steps(smoke) == []
    assert builders.emulation_problem("smoke", [], ("linux/amd64", "linux/arm64"), ("linux/amd64",), "x") is None


def test_an_unknown_builder_refuses_nothing():
    assert builders.emulation_problem("cu13", ["apex"], ("linux/arm64",), (), "k8s") is None


def test_a_platform_variant_is_judged_by_its_architecture():
    native = ("linux/arm64", "linux/arm")
    assert builders.emulation_problem("v", ["apex"], ("linux/arm64/v8",), native, "b") is None
    assert builders.emulation_problem("v", ["apex"], ("linux/amd64/v2",), native, "b") is not None


@pytest.mark.parametrize("name", ["cu13", "cu13-aarch64"])
def test_check_refuses_with_exit_2_unless_emulation_is_allowed(name):
    variant = CATALOG.resolve(name)
    x86 = builders.Builder("ci", "docker-container", native=builders.native_platforms(X86_WITH_QEMU))
    with pytest.raises(UsageError, match=f"^{name} compiles kernels .* for linux/arm64, ") as e:
        builders.check_emulation(x86, variant, allow=False)
    assert e.value.exit_code == 2
    builders.check_emulation(x86, variant, allow=True)


def test_cu13_x86_builds_on_an_x86_builder():
    x86 = builders.Builder(None, "docker", native=("linux/amd64", "linux/386"))
    builders.check_emulation(x86, CATALOG.resolve("cu13-x86"), allow=False)


def test_a_bake_that_names_no_builder_is_judged_against_this_machine(monkeypatch):
    monkeypatch.setattr(builders.host, "machine", lambda: "x86_64")
    with pytest.raises(UsageError, match=r"builder \(this machine's, as no --builder is named\) only emulates"):
        builders.check_emulation(None, CATALOG.resolve("cu13-aarch64"), allow=False)
    monkeypatch.setattr(builders.host, "machine", lambda: "aarch64")
    builders.check_emulation(None, CATALOG.resolve("cu13-aarch64"), allow=False)


@pytest.mark.parametrize("command", ["build", "bake"])
def test_allow_emulation_is_an_option_of_build_and_bake(command):
    args = parser().parse_args([command, "--target", "cu13", "--allow-emulation"])
    assert BuildRequest.from_args(args).allow_emulation is True
    args = parser().parse_args([command, "--target", "cu13"])
    assert BuildRequest.from_args(args).allow_emulation is False
