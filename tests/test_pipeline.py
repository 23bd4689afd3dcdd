"""ci/pipeline.py images, the main-branch flow, for real on smoke against a local registry: bake -> gates in the build
-> push -> pull back by digest -> verify (JUnit) -> markdown summary; a second run skips by input hash; a target whose
gate fails is never pushed and still gets a JUnit report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from registry_fixture import available, shared_registry
from support import ROOT

from toolkit.gates import sbom_attach

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def registry():
    """The registry shared by this test process; these tests push under their own namespace (ci/)."""
    if not available():
        pytest.fail("docker-registry is not installed (ci/setup.sh installs it)")
    return shared_registry()


def pipeline(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "ci.pipeline", *args], cwd=cwd, capture_output=True, text=True, timeout=1800
    )


def test_bake_push_verify_by_digest_and_summary_then_skip(registry, tmp_path, docker_client):
    reports, summary = tmp_path / "reports", tmp_path / "summary.md"
    ns = f"{registry.host}/ci"
    proc = pipeline(
        "images", "--target", "smoke", "--registry", ns, "--reports", str(reports), "--summary", str(summary)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr + (reports / "smoke.build.log").read_text()[-3000:]
    (res,) = json.loads((reports / "results.json").read_text())
    assert res["status"] == "verified" and res["digest"].startswith("sha256:")
    hash12 = res["input_hash"][:12]
    assert "ci/miles" in registry.catalog()
    # Its tags, and the referrers tag (this registry has no referrers API) under which its SBOM hangs.
    assert registry.tags("ci/miles") == sorted(["smoke", f"smoke-{hash12}", "sha256-" + res["digest"][7:]])
    assert len(sbom_attach.attached(f"{ns}/miles@{res['digest']}")) == 1
    # The JUnit report is the gate run on the image pulled back by digest.
    suite = ET.parse(reports / "smoke.junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) >= 5 and not suite.findall(".//failure") and not suite.findall(".//error")
    assert f"{ns}/miles@{res['digest']}" in (reports / "smoke.verify.log").read_text()
    text = summary.read_text()
    assert f"| `smoke` | ✅ verified | `{res['digest']}` | `{hash12}` |" in text
    assert f"- pull by digest: `{ns}/miles@{res['digest']}`" in text and "- timings: build" in text

    again = pipeline(
        "images", "--target", "smoke", "--registry", ns, "--reports", str(tmp_path / "again"), "--skip-existing"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"smoke: skip, {ns}/miles:smoke-{hash12} exists in registry {ns} ({res['digest']})" in again.stdout
    (res2,) = json.loads((tmp_path / "again" / "results.json").read_text())
    assert res2["status"] == "skipped" and res2["digest"] == res["digest"]
    assert not (tmp_path / "again" / "smoke.build.log").exists()
    for ref in (f"{ns}/miles:smoke", f"{ns}/miles:smoke-{hash12}", f"{ns}/miles@{res['digest']}"):
        subprocess.run(["docker", "rmi", ref], capture_output=True)


def test_a_failing_gate_pushes_nothing_and_reports_junit(registry, project_copy, tmp_path):
    shutil.copytree(ROOT / "ci", project_copy / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + "\ndef broken(:\n")
    before = {repo: registry.tags(repo) for repo in registry.catalog()}
    reports = tmp_path / "reports"
    proc = pipeline(
        "images", "--target", "smoke", "--registry", f"{registry.host}/ci", "--reports", str(reports), cwd=project_copy
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (res,) = json.loads((reports / "results.json").read_text())
    assert res["status"] == "build-failed" and not res["digest"]
    failure = ET.parse(reports / "smoke.junit.xml").getroot().find(".//failure")
    assert failure is not None and "sglang_attn_bridge" in failure.text
    assert {repo: registry.tags(repo) for repo in registry.catalog()} == before
