"""docs/upstream-parity.md has one row per step of upstream's two Dockerfiles, read from the upstream snapshot.

A step is keyed by its instruction and the first 48 characters of its text (whitespace collapsed, URLs as <url>),
the key the doc's first column shows. Upstream steps without a row, and rows naming no upstream step, both fail:
after a bump of the miles pin the failure lists exactly the steps that moved.
"""

import io
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from support import SNAPSHOT

from toolkit.spec.catalog import ROOT

SNAPSHOT_ENV = "MILES_UPSTREAM_SNAPSHOT"
DOC = ROOT / "docs" / "upstream-parity.md"
FILES = ("docker/Dockerfile.rocm", "docker/Dockerfile")
STATUSES = {"same", "different", "unknown", "n/a"}
# A pip install of a file of upstream's wheels release: its version and build flags are recorded nowhere.
_RELEASE_WHEEL = re.compile(r"pip install [^&;|]*/tmp/wheels/|set -- /tmp/wheels/")
_URL = re.compile(r"https?://\S+")
_ROW = re.compile(r"^\| `(?P<key>.+?)` \| (?P<ours>.*?) \| (?P<status>[^|]+?) \| (?P<why>.*) \|$")


def step_key(instruction: str, value: str) -> str:
    return "%s %s" % (instruction, _URL.sub("<url>", " ".join(value.split()))[:48].rstrip())


def upstream_steps(text: str) -> list:
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    return [step_key(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]


def doc_rows(text: str) -> dict:
    """{upstream file: [(key, ours, status, why), ...]} from the doc's per-file tables."""
    rows, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = rows.setdefault(line[3:].strip(), [])
        match = _ROW.match(line.replace("\\|", "\0"))
        if match and current is not None:
            current.append(tuple(match.group(g).replace("\0", "|").strip() for g in ("key", "ours", "status", "why")))
    return rows


def _snapshot() -> Path:
    import os

    path = Path(os.environ.get(SNAPSHOT_ENV, SNAPSHOT))
    if not path.is_file():
        pytest.skip("upstream snapshot %s is absent (set %s to its path)" % (path, SNAPSHOT_ENV))
    return path


@pytest.fixture(scope="module")
def upstream():
    with tarfile.open(_snapshot()) as tar:
        return {name: tar.extractfile("miles/" + name).read().decode() for name in FILES}


@pytest.mark.parametrize("name", FILES)
def test_every_upstream_step_has_exactly_one_row(upstream, name):
    steps = Counter(upstream_steps(upstream[name]))
    rows = doc_rows(DOC.read_text()).get(name)
    assert rows, "docs/upstream-parity.md has no '## %s' table" % name
    documented = Counter(r[0] for r in rows)
    missing, stale = steps - documented, documented - steps
    assert not missing and not stale, "upstream steps without a row: %s; rows naming no upstream step: %s" % (
        sorted(missing),
        sorted(stale),
    )


def test_rows_say_what_and_why():
    rows = [r for table in doc_rows(DOC.read_text()).values() for r in table]
    assert len(rows) > 100
    for key, ours, status, why in rows:
        assert status in STATUSES, (key, status)
        assert ours, key
        if status != "same":
            assert why, "%s is %s without a reason" % (key, status)


@pytest.mark.parametrize("name", FILES)
def test_a_step_that_installs_a_release_wheel_is_never_same(upstream, name):
    """Upstream installs those from a wheels release whose assets carry no recorded digest, version or build flags:
    nothing can show that the image ends up the same, so such a row says different or unknown, and why."""
    parser = DockerfileParser(fileobj=io.BytesIO(upstream[name].encode()))
    wheel_steps = {
        step_key(i["instruction"], i["value"])
        for i in parser.structure
        if i["instruction"] == "RUN" and _RELEASE_WHEEL.search(" ".join(i["value"].split()))
    }
    assert len(wheel_steps) >= (7 if name == "docker/Dockerfile" else 1)
    same = sorted(
        key for key, _, status, _ in doc_rows(DOC.read_text())[name] if key in wheel_steps and status == "same"
    )
    assert not same, "rows that install a release wheel upstream but say same: %s" % same


def test_a_moved_step_is_reported(upstream):
    """The check can fail: an upstream edit to one step shows up as one missing row and one stale row."""
    text = upstream["docker/Dockerfile"].replace("flash-linear-attention==0.4.2", "flash-linear-attention==0.5.0")
    steps = Counter(upstream_steps(text))
    documented = Counter(r[0] for r in doc_rows(DOC.read_text())["docker/Dockerfile"])
    assert list((steps - documented).elements()) == ["RUN pip install flash-linear-attention==0.5.0"]
    assert list((documented - steps).elements()) == ["RUN pip install flash-linear-attention==0.4.2"]
