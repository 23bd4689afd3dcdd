"""--json and --junit reports, parsed back."""

import json
import xml.etree.ElementTree as ET


def test_json_and_junit_reports(tmp_path, run_verify, write_tree):
    write_tree(tmp_path, {"goodpkg/__init__.py": "X = 1\n", "brokenpkg/__init__.py": "def f(:\n    pass\n"})
    js, xml = tmp_path / "out" / "report.json", tmp_path / "out" / "report.xml"
    js.parent.mkdir()
    proc = run_verify(
        "--import",
        "goodpkg",
        "--import",
        "brokenpkg",
        "--compile",
        "brokenpkg",
        "--json",
        js,
        "--junit",
        xml,
        pythonpath=[tmp_path],
    )
    assert proc.returncode == 1

    report = json.loads(js.read_text())
    assert (report["passed"], report["failed"], report["total"]) == (1, 2, 3)
    by_target = {(c["kind"], c["target"]): c for c in report["checks"]}
    assert by_target[("import", "goodpkg")]["status"] == "PASS"
    bad = by_target[("import", "brokenpkg")]
    assert bad["status"] == "FAIL" and "SyntaxError" in bad["detail"]
    assert "%s:1" % (tmp_path / "brokenpkg" / "__init__.py") in bad["detail"]
    assert "Traceback" in bad["log"] and isinstance(bad["seconds"], float)
    assert [c["kind"] for c in report["checks"]] == ["compile", "import", "import"]

    root = ET.parse(xml).getroot()
    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite.get("tests") == "3" and suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("verify.compile", "brokenpkg"),
        ("verify.import", "goodpkg"),
        ("verify.import", "brokenpkg"),
    ]
    assert cases[1].find("failure") is None
    failure = cases[2].find("failure")
    assert "SyntaxError" in failure.get("message") and "Traceback" in failure.text
    assert float(cases[0].get("time")) >= 0.0


def test_unwritable_report_is_usage_error(tmp_path, run_verify):
    proc = run_verify("--import", "json", "--json", tmp_path / "no" / "such" / "dir" / "r.json")
    assert proc.returncode == 2 and "cannot write" in proc.stderr


def test_junit_survives_control_characters(tmp_path, run_verify, write_tree):
    write_tree(tmp_path, {"ctrlpkg/__init__.py": "raise RuntimeError('bell \\x07 and escape \\x1b[31m')\n"})
    xml = tmp_path / "r.xml"
    proc = run_verify("--import", "ctrlpkg", "--junit", xml, pythonpath=[tmp_path])
    assert proc.returncode == 1
    failure = ET.parse(xml).getroot().find("testsuite/testcase/failure")
    assert "bell" in failure.get("message")


def test_json_to_stdout_is_one_bounded_line(tmp_path, run_verify, write_tree):
    """`--json -`: the report alone on stdout, one line a log reader finds, small enough for BuildKit's log limit
    (it clips a step's output past 200 KiB/s) however long the checks' own logs are; check lines go to stderr."""
    from verify.report import STREAM_LIMIT, find_report, stream_line
    from verify.result import CheckResult

    write_tree(tmp_path, {"loud/__init__.py": "raise ImportError('x' * 500000)\n"})
    proc = run_verify("--import", "json", "--import", "loud", "--json", "-", pythonpath=[tmp_path])
    assert proc.returncode == 1
    (line,) = proc.stdout.splitlines()
    report = find_report(proc.stdout.splitlines())
    assert report["runner"] == "verify" and (report["passed"], report["failed"]) == (1, 1)
    assert proc.stderr.splitlines()[-1] == "1 passed, 1 failed"
    assert "FAIL  import      loud" in proc.stderr
    many = [CheckResult("command", "c%d" % i, i % 2 == 0, "d" * 200, log="L" * 50000) for i in range(200)]
    text = stream_line(many)
    assert len(text.encode()) <= STREAM_LIMIT and text.count("\n") == 1
    assert len(find_report([text])["checks"]) == 200
