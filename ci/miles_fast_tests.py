#!/usr/bin/env python3
"""Upstream's own CPU tests (miles' `tests/fast`) inside a built miles-cpu image (run on purpose, not a test).

Runs pytest on the miles tree the image holds (/root/miles), with no network but loopback (the gloo tests' ranks
meet there) and `HF_HUB_OFFLINE=1` (a hub lookup then fails at once instead of retrying), writes a JUnit file to a
host folder mounted for that run, and prints passed / failed / errors / skipped, each collection error with its
reason, and the failures grouped by exception class. The slow test `tests/test_miles_cpu.py` runs
`tests/fast/backends` the same way and holds it to `tests/miles_fast_expected.json`; this script runs the whole of
`tests/fast`, and the README keeps its last result.

    python3 -m ci.miles_fast_tests [--image miles:miles-cpu] [--json FILE] [PATH_IN_MILES ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = ROOT / "tests" / "miles_fast_expected.json"
PYTHON = "/opt/venv/bin/python"
MILES = "/root/miles"


@dataclass(frozen=True)
class Case:
    """One JUnit test case: its id (`classname::name`, as pytest's JUnit writer names it), what became of it, and
    the first line of its reason (the exception, or a skip's message)."""

    id: str
    outcome: str  # passed | failed | error | skipped | collection
    reason: str = ""


@dataclass
class Run:
    cases: list[Case] = field(default_factory=list)
    exit_code: int = 0
    seconds: float = 0.0
    log_tail: str = ""

    def of(self, outcome: str) -> list[Case]:
        return [c for c in self.cases if c.outcome == outcome]

    def counts(self) -> dict[str, int]:
        n = Counter(c.outcome for c in self.cases)
        return {k: n.get(k, 0) for k in ("passed", "failed", "error", "skipped", "collection")}

    def not_passed(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases if c.outcome in ("failed", "error", "collection")}


def _reason(node: ET.Element) -> str:
    """The line that says why: pytest's `E   ` line naming the exception when the text has one, else the message."""
    text = node.text or ""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    named = [ln for ln in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failed)\b", ln)]
    pick = (named or lines or [node.get("message") or ""])[0]
    return pick.strip()[:300]


def parse_junit(path: Path) -> list[Case]:
    """Every test case of pytest's JUnit file. A collection error is a case with an empty classname whose error
    message is "collection failure" (pytest names it after the module)."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        cls, name = tc.get("classname") or "", tc.get("name") or ""
        if not cls and not name:
            continue  # a case with no name names no test (one was seen in an interrupted session's file)
        ident = f"{cls}::{name}" if cls else name
        failure, error, skipped = tc.find("failure"), tc.find("error"), tc.find("skipped")
        if error is not None and not cls and "collection failure" in (error.get("message") or ""):
            cases.append(Case(ident, "collection", _reason(error)))
        elif failure is not None:
            cases.append(Case(ident, "failed", _reason(failure)))
        elif error is not None:
            cases.append(Case(ident, "error", _reason(error)))
        elif skipped is not None:
            cases.append(Case(ident, "skipped", (skipped.get("message") or "")[:300]))
        else:
            cases.append(Case(ident, "passed"))
    return cases


def run_in_image(client, image: str, paths: list[str], log=print, stop_after: float | None = None) -> Run:
    """pytest on `paths` (relative to the miles tree) in a fresh container of `image`: loopback only, hub offline,
    the JUnit file written to a host folder mounted for this run only. The container is removed afterwards. After
    `stop_after` seconds pytest gets SIGINT: it ends the session as on Ctrl-C and writes the JUnit file for the
    tests that ran (pytest's exit 2)."""
    with tempfile.TemporaryDirectory(prefix="miles-fast-") as out:
        Path(out).chmod(0o777)
        argv = [
            PYTHON,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            MILES,
            "-q",
            "--continue-on-collection-errors",
        ]
        argv += ["--junit-xml=/tmp/out/junit.xml", "-o", "junit_family=xunit1", *paths]
        start = time.monotonic()
        container = client.containers.run(
            image,
            argv,
            detach=True,
            network_mode="none",  # loopback only: the gloo tests' ranks meet on 127.0.0.1
            working_dir=MILES,
            environment={"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            volumes={out: {"bind": "/tmp/out", "mode": "rw"}},
        )
        try:
            code = _wait(container, stop_after)
            logs = container.logs().decode(errors="replace")
        finally:
            container.remove(force=True)
        seconds = time.monotonic() - start
        junit = Path(out) / "junit.xml"
        if not junit.is_file():
            raise RuntimeError(f"pytest wrote no JUnit file (exit {code}):\n" + "\n".join(logs.splitlines()[-30:]))
        tail = "\n".join(logs.splitlines()[-5:])
        return Run(parse_junit(junit), code, seconds, tail)


def expected_for(suite: str, path: Path = EXPECTED) -> dict[str, tuple[str, str]]:
    """The reasoned list of tests of `suite` that do not pass here: test id -> (the exception it fails with, why)."""
    groups = json.loads(path.read_text())[suite]
    return {test: (g["raises"], g["reason"]) for g in groups for test in g["tests"]}


def judge(run: Run, expected: dict[str, tuple[str, str]]) -> list[str]:
    """What is wrong with `run` against the list: a test that does not pass and is not listed, a listed test that
    fails with another exception, a listed test that passes (it must leave the list). Empty when all is as listed."""
    bad = run.not_passed()
    problems = [f"not on the list: [{c.outcome}] {i}: {c.reason}" for i, c in bad.items() if i not in expected]
    for test, (raises, _) in expected.items():
        if test not in bad:
            problems.append(f"listed but not failing here (take it off the list): {test}")
        elif not bad[test].reason.startswith(raises):
            problems.append(f"listed as raising {raises}, failed with: {bad[test].reason}")
    return problems


def _wait(container, stop_after: float | None) -> int:
    import requests

    try:
        return container.wait(timeout=stop_after)["StatusCode"]
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):  # timed out: Ctrl-C it
        container.kill(signal="SIGINT")
        return container.wait(timeout=300)["StatusCode"]


def failure_classes(cases: list[Case]) -> list[tuple[str, int]]:
    """(exception class, how many) for failed and erroring tests, most first: the `Name` before the first colon."""
    return Counter(re.split(r"[:(\s]", c.reason, maxsplit=1)[0] or "(no reason)" for c in cases).most_common()


def report(run: Run, out=print) -> None:
    n = run.counts()
    out(
        f"passed {n['passed']}, failed {n['failed']}, errors {n['error']}, skipped {n['skipped']}, "
        f"collection errors {n['collection']} (pytest exit {run.exit_code}, {run.seconds / 60:.1f} min)"
    )
    if run.of("collection"):
        out("\ncollection errors:")
        for c in run.of("collection"):
            out(f"  {c.id}: {c.reason}")
    bad = run.of("failed") + run.of("error")
    if bad:
        out("\nfailed and erroring tests by exception class:")
        for cls, count in failure_classes(bad):
            out(f"  {count:>4}  {cls}")
        out("\neach failed or erroring test:")
        for c in bad:
            out(f"  [{c.outcome}] {c.id}: {c.reason}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="miles:miles-cpu")
    ap.add_argument("--json", type=Path, help="also write every case (id, outcome, reason) as JSON here")
    ap.add_argument("--stop-after", type=float, metavar="MINUTES", help="interrupt pytest then (it reports what ran)")
    ap.add_argument("paths", nargs="*", default=["tests/fast"])
    args = ap.parse_args()
    import docker

    stop = args.stop_after * 60 if args.stop_after else None
    run = run_in_image(docker.from_env(), args.image, args.paths, stop_after=stop)
    report(run)
    if args.json:
        args.json.write_text(json.dumps([c.__dict__ for c in run.cases], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
