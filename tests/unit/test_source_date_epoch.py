"""The build clock (SOURCE_DATE_EPOCH): every target has a fixed one, the miles families take miles' commit time, and
it reaches both BuildKit (the build arg) and the steps (the Dockerfile's ARG)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from toolkit.engine.invocation import epoch_arg
from toolkit.errors import SpecError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import MAX_EPOCH, check_source_date_epoch, load_catalog

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "upstream"


@pytest.mark.parametrize("target", sorted(load_catalog().variants))
def test_every_target_renders_and_passes_its_fixed_clock(target):
    plan = make_plan(load_catalog().resolve(target), revision="x")
    epoch = plan.variant.source_date_epoch
    assert 0 < epoch <= MAX_EPOCH
    assert f"ARG SOURCE_DATE_EPOCH={epoch}\n" in render(plan)
    assert epoch_arg(plan) == {"SOURCE_DATE_EPOCH": str(epoch)}


def test_the_miles_families_clock_is_the_commit_time_of_miles_pin():
    """The snapshot of miles' pinned commit (a `git archive`: its pax header names the commit, every member carries
    the commit's time) gives the clock the miles layer records."""
    catalog = load_catalog()
    variant = catalog.resolve("miles-cpu")
    ref = variant.components["miles"]["ref"]
    snapshots = [p for p in UPSTREAM.glob("miles-*.tar.gz") if tarfile.open(p).pax_headers.get("comment") == ref]
    if not snapshots:
        pytest.skip(f"no snapshot of miles {ref[:12]} beside the repository")
    with tarfile.open(snapshots[0]) as tar:
        times = {m.mtime for m in tar.getmembers()}
    assert times == {variant.source_date_epoch}
    for name in ("cu13-x86", "rocm", "miles-cpu"):
        assert catalog.resolve(name).source_date_epoch == variant.source_date_epoch


@pytest.mark.parametrize(
    "raw,problem",
    [
        ({}, "missing required key"),
        ({"source_date_epoch": 0}, "a Unix time from 1 to"),
        ({"source_date_epoch": -5}, "a Unix time from 1 to"),
        ({"source_date_epoch": MAX_EPOCH + 1}, "a Unix time from 1 to"),
    ],
)
def test_a_family_without_a_usable_clock_is_refused_naming_the_key(raw, problem):
    with pytest.raises(SpecError) as e:
        check_source_date_epoch(raw, "images/demo.yaml")
    assert str(e.value).startswith("images/demo.yaml: source_date_epoch: " + problem)
