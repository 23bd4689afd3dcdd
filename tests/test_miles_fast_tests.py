"""The report and the judge of ci/miles_fast_tests.py, on a real JUnit file: pytest runs a small suite with a pass,
a failure, an error in setup, a skip and a module that does not import, and the parser must tell each apart; the
judge must report an unlisted failure, a listed test that passes and one that fails with another exception."""

from __future__ import annotations

import json
import subprocess
import sys

from ci import miles_fast_tests as mft

SUITE = {
    "test_mixed.py": """
import subprocess
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_passes():
    assert 1 + 1 == 2

def test_clones():
    subprocess.run(["false"], check=True)

def test_setup_error(broken):
    pass

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
""",
    "test_unimportable.py": "import no_such_module_anywhere\n",
}


def _junit(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors"]
    argv += [f"--junit-xml={out}", "-o", "junit_family=xunit1", "--rootdir", str(tmp_path), str(tmp_path)]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1 and out.is_file(), proc.stdout + proc.stderr
    return out


def test_the_report_tells_every_outcome_apart(tmp_path):
    run = mft.Run(mft.parse_junit(_junit(tmp_path)))
    by_id = {c.id: c for c in run.cases}
    assert run.counts() == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "collection": 1}
    assert by_id["test_mixed::test_clones"].reason.startswith("subprocess.CalledProcessError")
    assert by_id["test_mixed::test_setup_error"].reason.startswith("RuntimeError: fixture broke")
    assert by_id["test_mixed::test_skipped"].reason == "not here"
    (collection,) = run.of("collection")
    assert collection.id == "test_unimportable" and "No module named 'no_such_module_anywhere'" in collection.reason
    lines = []
    mft.report(run, out=lines.append)
    assert lines[0].startswith("passed 1, failed 1, errors 1, skipped 1, collection errors 1")
    assert "  test_unimportable: ModuleNotFoundError: No module named 'no_such_module_anywhere'" in lines
    assert "     1  subprocess.CalledProcessError" in lines and "     1  RuntimeError" in lines


def test_the_judge_holds_a_run_to_the_list(tmp_path):
    run = mft.Run(mft.parse_junit(_junit(tmp_path)))
    listed = {
        "test_mixed::test_clones": ("subprocess.CalledProcessError", "needs the network"),
        "test_mixed::test_setup_error": ("RuntimeError", "a fixture of the real suite"),
        "test_unimportable": ("ModuleNotFoundError", "a module the image lacks"),
    }
    assert mft.judge(run, listed) == []
    wrong = dict(listed, **{"test_mixed::test_clones": ("AssertionError", "x"), "test_mixed::test_passes": ("E", "y")})
    del wrong["test_unimportable"]
    assert sorted(p.split(":")[0] for p in mft.judge(run, wrong)) == [
        "listed as raising AssertionError, failed with",
        "listed but not failing here (take it off the list)",
        "not on the list",
    ]


def test_the_repository_list_is_well_formed():
    """Every group of tests/miles_fast_expected.json names an exception, a reason and at least one test, once."""
    data = json.loads(mft.EXPECTED.read_text())
    suites = [k for k in data if k != "about"]
    assert suites == ["tests/fast/backends"]
    seen = []
    for group in data["tests/fast/backends"]:
        assert set(group) == {"raises", "reason", "tests"} and group["raises"] and len(group["reason"]) > 40
        seen += group["tests"]
    assert seen and len(seen) == len(set(seen))
    assert len(mft.expected_for("tests/fast/backends")) == len(seen)
