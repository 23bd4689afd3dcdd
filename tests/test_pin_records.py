"""Every git component's pin is traceable: its `record` names where the commit is recorded, and the record says so.

`miles:FILE#KEY` is a key of a JSON file in miles' own tree at the pinned miles commit (its release lock),
`miles:FILE` a file of that tree that names the commit (upstream's Dockerfiles), `verified: ...` an explicit reason
(a tag or branch head resolved against the repository). The records are read from the upstream snapshots beside
the checkout, found by the commit their archive header records."""

from __future__ import annotations

import json
import tarfile

import pytest
from support import SNAPSHOT, snapshot_of

from toolkit.spec.catalog import load_catalog

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


@pytest.fixture(scope="module")
def miles():
    if not SNAPSHOT.is_file():
        pytest.skip(f"the miles snapshot {SNAPSHOT.name} is not beside the checkout")
    return SNAPSHOT


def record_problem(miles, record: str, ref: str) -> str | None:
    """Why `record` does not record `ref`, or None."""
    if not record:
        return f"says nowhere where {ref} is recorded (`record`)"
    if record.startswith("miles:"):
        path, _, key = record[len("miles:") :].partition("#")
        text = snapshot_file(miles, path)
        found = json.loads(text)[key] if key else text
        if (found != ref) if key else (ref not in found):
            return f"{record} does not record {ref}"
        return None
    if not (record.startswith("verified: ") and len(record) > len("verified: ") + 15):
        return f"a record is `miles:FILE[#KEY]` or `verified: <reason>`, got {record!r}"
    return None


@pytest.mark.parametrize("name, git, ref, record", PINS, ids=[p[0] for p in PINS])
def test_every_pin_is_found_in_its_record(miles, name, git, ref, record):
    assert record_problem(miles, record, ref) is None, f"components.{name}: {record_problem(miles, record, ref)}"


def test_the_miles_and_megatron_pins_are_the_snapshots_the_tests_use(miles):
    megatron = {c["ref"] for v in CATALOG.variants.values() for n, c in v.components.items() if n == "megatron_lm"}
    assert len(megatron) == 1
    assert snapshot_of(megatron.pop()) is not None, "no snapshot of the pinned Megatron-LM commit beside the checkout"


def test_a_wrong_record_fails(miles):
    """The check can fail: the commit the GPU specs pinned before (in no public ref) is in no record of miles."""
    old = "e6007f1613a02761e69d4449767f72102da203bf"
    assert record_problem(miles, "miles:release-lock.json#megatron_commit", old)
    assert record_problem(miles, "miles:docker/Dockerfile", old)
    assert record_problem(miles, "", old) and record_problem(miles, "verified: x", old)
