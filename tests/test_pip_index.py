"""Every exact pin of a GPU variant meets its index (toolkit/lock/pip_index.py).

The failure cases run against a real index server on 127.0.0.1 (PEP 503 pages and real wheel files, built here),
so each way a pin can be unbuildable is shown to fail naming the variant, step and pin. The slow test asks the real
default index for every GPU variant of the specs: what a build on a GPU host will meet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types

import pytest
from local_servers import LocalIndex, wheel_file

from toolkit.lock import pip_index
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
BASE = types.SimpleNamespace(python_version="3.12", glibc="2.35")


@pytest.fixture
def index():
    idx = LocalIndex()
    yield idx
    idx.server.stop()


def _variant(steps, pins):
    """cu13-x86 with only these steps and pins (the rest of the variant as the spec has it)."""
    return dataclasses.replace(CATALOG.resolve("cu13-x86"), steps=tuple(steps), pip=dict(pins))


def _check(variant, index):
    (report,) = pip_index.check_variant(variant, pip_index.Index(index.url), {}, base=BASE)
    return report


def test_a_pin_the_index_holds_is_found_with_its_digest(index):
    name, body = wheel_file("good-pkg", "1.0", "py3-none-any")
    index.add("good-pkg", name, body)
    report = _check(_variant([{"kind": "pip", "value": ["good-pkg"]}], {"good-pkg": "1.0"}), index)
    assert report.problems == [] and report.pending == []
    found = report.found[("steps[0]", "good-pkg")]
    assert (found.file, found.kind, found.sha256) == (name, "wheel", hashlib.sha256(body).hexdigest())


def test_a_pin_removed_from_the_index_fails_naming_variant_step_and_pin(index):
    name, body = wheel_file("gone-pkg", "1.0", "py3-none-any")
    index.add("gone-pkg", name, body)
    report = _check(_variant([{"kind": "pip", "value": ["gone-pkg"]}], {"gone-pkg": "2.0"}), index)
    assert report.problems == ["cu13-x86 (linux/amd64) steps[0]: gone-pkg==2.0: no file for this version and platform"]


def test_a_wheel_for_another_platform_only_is_no_file(index):
    name, body = wheel_file("arm-only", "1.0", "cp312-cp312-manylinux_2_28_aarch64")
    index.add("arm-only", name, body)
    report = _check(_variant([{"kind": "pip", "value": ["arm-only"]}], {"arm-only": "1.0"}), index)
    assert len(report.problems) == 1 and "arm-only==1.0: no file" in report.problems[0]


def test_an_sdist_only_pin_fails_unless_its_step_builds_against_the_image(index):
    index.add("src-only", "src_only-1.0.tar.gz", b"not really gzip, never downloaded")
    isolated = _variant([{"kind": "pip", "value": ["src-only"]}], {"src-only": "1.0"})
    report = _check(isolated, index)
    assert len(report.problems) == 1
    assert "steps[0]: src-only==1.0: only an sdist (src_only-1.0.tar.gz)" in report.problems[0]
    built = _variant([{"kind": "pip", "value": ["src-only"], "flags": ["no-build-isolation"]}], {"src-only": "1.0"})
    report = _check(built, index)
    assert report.problems == [] and report.found[("steps[0]", "src-only")].kind == "sdist"


def test_a_yanked_file_is_refused_with_its_reason(index):
    name, body = wheel_file("pulled", "1.0", "py3-none-any")
    index.add("pulled", name, body, yanked="broken metadata")
    report = _check(_variant([{"kind": "pip", "value": ["pulled"]}], {"pulled": "1.0"}), index)
    assert report.problems == ["cu13-x86 (linux/amd64) steps[0]: pulled==1.0: yanked (broken metadata)"]


def test_an_extras_exact_pins_must_meet_the_index_too(index):
    name, body = wheel_file("core", "1.0", "py3-none-any", requires=['core-ext==1.0; extra == "x"', "other>=1"])
    index.add("core", name, body)
    index.add("core-ext", "core_ext-1.0.tar.gz", b"sdist")
    report = _check(_variant([{"kind": "pip", "value": ["core[x]"]}], {"core[x]": "1.0"}), index)
    assert report.problems == [
        "cu13-x86 (linux/amd64) steps[0]: core-ext==1.0: only an sdist (core_ext-1.0.tar.gz), which pip would build "
        "in isolation against the index's newest build requirements: build it with no-build-isolation against the image"
    ]


def test_a_steps_extra_index_is_searched_and_an_unreachable_one_leaves_the_pin_pending(index):
    other = LocalIndex()
    try:
        name, body = wheel_file("vendor-pkg", "1.0", "py3-none-any")
        other.add("vendor-pkg", name, body)
        step = {"kind": "pip", "value": ["vendor-pkg"], "extra_index": [other.url]}
        report = _check(_variant([step], {"vendor-pkg": "1.0"}), index)
        assert report.problems == [] and report.found[("steps[0]", "vendor-pkg")].index == other.url
    finally:
        other.server.stop()
    report = _check(_variant([step], {"vendor-pkg": "1.0"}), index)  # the vendor's index is gone now
    assert (
        report.problems == []
        and len(report.pending) == 1
        and "vendor-pkg==1.0: index not reachable" in report.pending[0]
    )


def test_steps_whose_when_excludes_the_variant_are_not_checked():
    steps = [{"kind": "pip", "value": ["a"], "when": {"CUDA_MAJOR": "12"}}, {"kind": "pip", "value": ["b"]}]
    uses = pip_index.pin_uses(_variant(steps, {"a": "1", "b": "2"}))
    assert [(u.step, u.name) for u in uses] == [("steps[1]", "b")]


@pytest.mark.slow
@pytest.mark.parametrize("name", [v.name for v in pip_index.gpu_variants(CATALOG)])
def test_every_gpu_pin_resolves_on_the_real_index(name):
    """The default index as a GPU build meets it. Pins of an extra index this host cannot reach stay pending and
    are listed; none may be a problem."""
    variant = CATALOG.resolve(name)
    reports = pip_index.check_variant(variant, pip_index.host_index(), {})
    for report in reports:
        assert report.problems == [], "\n".join(report.problems)
        assert len(report.found) >= len(pip_index.pin_uses(variant)) - len(report.pending)
        declared = {url for use in pip_index.pin_uses(variant) for url in use.indexes}
        for line in report.pending:
            assert "index not reachable" in line and any(url in line for url in declared), line
