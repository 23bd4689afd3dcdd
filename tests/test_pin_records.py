"""Every git component's pin is traceable: its `record` names where the commit is recorded, and the record says so.

`miles:FILE#KEY` is a key of a JSON file in miles' own tree at the pinned miles commit (its release lock),
`miles:FILE` a file of that tree that names the commit (upstream's Dockerfiles), `verified: ...` an explicit reason
(a tag or branch head resolved against the repository). The records are read from the upstream snapshots beside
the checkout, found by the commit their archive header records."""

from __future__ import annotations

import json
import tarfile

import pytest
from support import SNAPSHOT, UPSTREAM

from toolkit.spec import load_catalog

CATALOG = load_catalog()
PINS = sorted(
    {
        (name, c["git"], c["ref"], c.get("record", ""))
        for v in CATALOG.variants.values()
        for name, c in v.components.items()
    }
)


def snapshot_file(archive, path: str) -> str:
    with tarfile.open(archive) as tar:
        member = next((m for m in tar.getmembers() if m.name.split("/", 1)[-1] == path), None)
        if member is None:
            raise AssertionError(f"{path} is not in {archive.name}")
        return tar.extractfile(member).read().decode()


def archive_of(commit: str):
    for path in sorted(UPSTREAM.glob("*.tar.gz")):
        with tarfile.open(path) as tar:
            if tar.pax_headers.get("comment") == commit:
                return path
    return None


@pytest.fixture(scope="module")
def miles():
    if not SNAPSHOT.is_file():
        pytest.skip(f"the miles snapshot {SNAPSHOT.name} is not beside the checkout")
    return SNAPSHOT


@pytest.mark.parametrize("name, git, ref, record", PINS, ids=[p[0] for p in PINS])
def test_every_pin_is_found_in_its_record(miles, name, git, ref, record):
    assert record, f"components.{name} says nowhere where {ref} is recorded (`record`)"
    if record.startswith("miles:"):
        path, _, key = record[len("miles:") :].partition("#")
        text = snapshot_file(miles, path)
        if key:
            assert json.loads(text)[key] == ref, f"{record} records {json.loads(text)[key]}, the spec pins {ref}"
        else:
            assert ref in text, f"{path} of miles at its pin does not name {ref}"
    else:
        assert record.startswith("verified: ") and len(record) > len("verified: ") + 15, record


def test_the_miles_and_megatron_pins_are_the_snapshots_the_tests_use(miles):
    megatron = {c["ref"] for v in CATALOG.variants.values() for n, c in v.components.items() if n == "megatron_lm"}
    assert len(megatron) == 1
    assert archive_of(megatron.pop()) is not None, "no snapshot of the pinned Megatron-LM commit beside the checkout"


def test_a_wrong_record_fails(miles):
    """The check can fail: a commit the release lock does not hold is caught."""
    lock = json.loads(snapshot_file(miles, "release-lock.json"))
    assert lock["megatron_commit"] != "e6007f1613a02761e69d4449767f72102da203bf"
    assert "e6007f1613a02761e69d4449767f72102da203bf" not in snapshot_file(miles, "docker/Dockerfile")
