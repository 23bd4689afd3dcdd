"""What a builder cannot do is refused before anything is built: exit 2, one line naming the builder or option
(toolkit/engine/builders.py), and nothing tagged. The fleet tier (tests/test_fleet.py) runs what a capable builder
can."""

from __future__ import annotations

import pytest
from support import run_build_py

pytestmark = pytest.mark.docker


def refused(*args) -> str:
    proc = run_build_py("build", "--target", *args, timeout=600)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("build.py: "), proc.stderr
    assert "tagged" not in proc.stdout
    return lines[0]


def test_the_classic_engine_builds_one_platform_and_exports_no_cache():
    line = refused("smoke", "--set", "platforms=linux/amd64,linux/arm64", "--push", "--registry", "127.0.0.1:9")
    assert "builder default (docker driver, classic image store) builds one platform at a time" in line
    line = refused("smoke", "--cache", "127.0.0.1:9/cache")
    assert "cannot export cache; use --cache-from to import only" in line


def test_an_unknown_builder_is_named():
    assert "--builder 'no-such-builder': no such buildx builder or docker context" in refused(
        "smoke", "--builder", "no-such-builder"
    )
    assert "not a builder name" in refused("smoke", "--builder=-rm")


def test_a_platform_without_wheels_or_a_registry():
    assert "wheelhouse.other_platforms has no wheels for 'linux/arm64'" in refused(
        "miles-cpu", "--set", "platforms=linux/arm64"
    )
    # arm64 on this machine's engine: its base and wheelhouse here are the amd64 ones the Dockerfile names
    assert "reads miles-base:bookworm-minbase-py311-git, miles-wheelhouse:" in refused("smoke-arm64")


def test_upstream_tag_options_go_together():
    assert "--image-tag custom needs --custom-tag NAME" in refused("smoke", "--image-tag", "custom")
    assert "--custom-tag needs --image-tag custom" in refused("smoke", "--custom-tag", "v1")
    assert "has no upstream_tags for miles-cpu" in refused("miles-cpu", "--image-tag", "dev")
