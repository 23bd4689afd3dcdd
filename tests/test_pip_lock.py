"""The lock records each exact pip pin's file (toolkit/lock/pip_lock.py); `lock --check` sees a file change or go.

Against a real index server on 127.0.0.1 (the host's index for these calls, as PIP_INDEX_URL points pip at one)."""

from __future__ import annotations

import dataclasses

import pytest
from local_servers import wheel_file

from toolkit.errors import SpecError
from toolkit.lock import file as lock_file
from toolkit.lock import pip_lock
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()


def _variant(name="cu13"):
    """A two-platform CUDA variant with two pins: one plain, one whose extra brings an sdist built in the step."""
    steps = ({"kind": "pip", "value": ["core[x]", "plain"], "flags": ["no-build-isolation"]},)
    return dataclasses.replace(CATALOG.resolve(name), steps=steps, pip={"core[x]": "1.0", "plain": "2.0"})


def _publish(index):
    for tag in ("py3-none-any",):
        name, body = wheel_file("core", "1.0", tag, requires=['core-ext==1.0; extra == "x"'])
        index.add("core", name, body)
    index.add("core-ext", "core_ext-1.0.tar.gz", b"sdist bytes")
    for arch in ("x86_64", "aarch64"):
        name, body = wheel_file("plain", "2.0", f"cp312-cp312-manylinux_2_28_{arch}")
        index.add("plain", name, body)


def test_lock_records_each_pin_per_platform_with_what_its_extras_bring(index):
    _publish(index)
    section, problems = pip_lock.resolve([_variant()])
    assert problems == []
    assert set(section) == {"core[x]==1.0", "plain==2.0"}
    assert set(section["plain==2.0"]) == {"py3.12 linux/amd64", "py3.12 linux/arm64"}
    amd, arm = section["plain==2.0"]["py3.12 linux/amd64"], section["plain==2.0"]["py3.12 linux/arm64"]
    assert amd["file"].endswith("x86_64.whl") and arm["file"].endswith("aarch64.whl") and amd["sha256"] != arm["sha256"]
    core = section["core[x]==1.0"]["py3.12 linux/amd64"]
    assert core["brings"]["core-ext==1.0"]["kind"] == "sdist" and core["index"] == "default"
    pip_lock.check_section(section, "x.lock.json")  # what lock writes, the lock reads back


def test_a_locked_record_is_kept_without_asking_the_index_again(index):
    _publish(index)
    section, _ = pip_lock.resolve([_variant()])
    index.server.stop()  # nothing answers now
    again, problems = pip_lock.resolve([_variant()], old=section)
    assert again == section and problems == []


def test_check_reports_a_file_that_changed_or_went(index):
    _publish(index)
    locked, _ = pip_lock.resolve([_variant()])
    index.projects.clear()
    name, body = wheel_file("core", "1.0", "py3-none-any", requires=['core-ext==1.0; extra == "x"', "new>=1"])
    index.add("core", name, body)  # re-published with other bytes
    index.add("core-ext", "core_ext-1.0.tar.gz", b"sdist bytes")
    index.server.routes.pop("/simple/plain/")  # and `plain` is gone from the index
    now, problems = pip_lock.resolve([_variant()], update=True)
    rows = {row[0]: row[3] for row in pip_lock.compare(locked, now)}
    assert rows["pip/core[x]==1.0"] == "yes"
    assert rows["pip/plain==2.0"] == "yes (gone: no such project)"
    assert len(problems) == 2 and all("plain==2.0: no such project" in p for p in problems)


def test_an_unreachable_index_leaves_pins_pending(index):
    index.server.stop()
    section, problems = pip_lock.resolve([_variant("cu13-x86")])
    assert problems == [] and section["plain==2.0"] == {"py3.12 linux/amd64": dict(pip_lock.PENDING)}
    assert pip_lock.compare(section, section)[1][3] == "pending"


def test_a_hand_edited_pip_section_is_refused_naming_the_key():
    lock = {"schema": 1, "family": "cuda", "sources": {}, "artifacts": {}}
    bad = {"plain==2.0": {"py3.12 linux/amd64": {"file": "p.whl", "kind": "wheel", "sha256": "xyz", "index": "d"}}}
    with pytest.raises(SpecError, match=r"pip\.plain==2\.0\.py3\.12 linux/amd64\.sha256: not a sha256 hex"):
        lock_file.check(dict(lock, pip=bad), "images/cuda.lock.json", "cuda")


def test_the_committed_cuda_lock_records_every_pin_of_every_cuda_variant():
    """`build.py lock` was run: each exact pin each CUDA variant installs has a record for each platform."""
    from toolkit.lock import family as lock_cmd
    from toolkit.lock.pip_index import pin_uses
    from toolkit.spec.catalog import IMAGES_DIR

    locked = lock_file.load(IMAGES_DIR / "cuda.lock.json", "cuda.lock.json", "cuda")["pip"]
    for v in lock_cmd._gpu_variants(IMAGES_DIR / "cuda.yaml"):
        for use in pin_uses(v):
            for platform in v.platforms:
                assert f"py3.12 {platform}" in locked[f"{use.name}=={use.version}"], (v.name, use.name, platform)
