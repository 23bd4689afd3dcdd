"""The build fleet for real, on this machine: engine B (tests/fleet_engine.py: a second Docker engine with the
containerd image store and a network of its own) and a registry (Debian's docker-registry), both started here and
removed at the end whatever happens, beside engine A (the engine every other test uses, classic image store).

In order, each test using what the one before left in the registry:
1. a cold two-platform smoke build on engine B pushes one manifest list and exports its cache (mode=max); its
   provenance (mode=max) and each platform's SBOM are read back from the registry;
2. engine A builds the same target from that cache: every RUN step CACHED;
   engine B builds it again with --no-cache, kept in its store, and a third engine C, nothing cached, builds the same
   image ID (reproducible: the OCI archive with rewritten file times); a hand change to it is named;
3. `build.py verify` checks each platform of the list by digest (arm64 under qemu);
4. `build.py bake` of two targets (smoke, smoke-arm64) runs on engine B, both from the shared cache;
5. engine B killed mid-build: exit 1 or 3, no tag moved, the registry still serves what it held, and engine A
   still runs uncached RUN steps (its network untouched by B).
The figures (times, CACHED counts, digests) are written to build/fleet-figures.json at the end of the module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from fleet_engine import CONTEXT, SecondEngine
from registry_fixture import available, local_registry
from support import ROOT, run_build_py

from toolkit.engine.local_images import platforms_of
from toolkit.gates import sbom_attach
from toolkit.spec.catalog import load_catalog

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.fleet]

TWO = "linux/amd64,linux/arm64"
DIGEST_LINE = re.compile(r"^digest: (\S+)@(sha256:[0-9a-f]{64})$", re.M)
STEP_LINE = re.compile(r"^  \[(?:linux/\S+ )?stage-0 \d+/\d+\] (\w+) .*\s(cached|\d+\.\ds)$", re.M)
FIGURES: dict = {}
SMOKE = load_catalog().resolve("smoke")


@pytest.fixture(scope="module")
def fleet():
    if not available():
        pytest.fail("docker-registry is not installed (ci/setup.sh installs it)")
    with local_registry() as reg:
        engine_b = SecondEngine()
        try:
            engine_b.start()
            yield reg, engine_b
        finally:
            engine_b.remove()
            if FIGURES:  # pytest captures the output: the figures go to a file of the checkout's build folder
                (ROOT / "build").mkdir(exist_ok=True)
                (ROOT / "build" / "fleet-figures.json").write_text(json.dumps(FIGURES, indent=1) + "\n")


def build(engine_b, *args, timeout=3600):
    started = time.monotonic()
    proc = run_build_py("build", "--target", "smoke", *args, env=engine_b.env(), timeout=timeout)
    return proc, time.monotonic() - started


def run_steps(stdout: str) -> list:
    """(instruction, 'cached' or seconds) of every Dockerfile step the build printed."""
    return STEP_LINE.findall(stdout)


def uncached_run_on_engine_a(reg) -> None:
    """An uncached RUN on engine A needs its bridge network (docker0): what a careless second engine breaks."""
    dockerfile = f"FROM {reg.host}/miles-base:bookworm-minbase-py311-git\nRUN echo {uuid.uuid4().hex} > /probe\n"
    proc = subprocess.run(
        ["docker", "buildx", "build", "--no-cache", "-q", "-"],
        input=dockerfile,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_cold_two_platform_build_on_engine_b(fleet):
    reg, engine_b = fleet
    assert subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode == 0
    proc, seconds = build(
        engine_b,
        "--set", f"platforms={TWO}",
        "--builder", CONTEXT,
        "--registry", reg.host,
        "--cache", f"{reg.host}/cache",
        "--push",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "builder fleet-b: docker driver, platforms linux/amd64,linux/arm64" in proc.stdout
    (repo, digest), *_ = DIGEST_LINE.findall(proc.stdout)
    listed = platforms_of(f"{repo}@{digest}")
    assert set(listed) == {"linux/amd64", "linux/arm64"}
    assert platforms_of(f"{reg.host}/miles:smoke") == listed  # the moving tag names the same list
    steps = run_steps(proc.stdout)
    assert {s for s, _ in steps} >= {"RUN"} and not any(took == "cached" for _, took in steps)
    assert "cache" in reg.catalog() and "smoke" in reg.tags("cache")
    FIGURES.update(cold_engine_b_s=round(seconds), manifest=f"{repo}@{digest}", platforms=listed)


def test_provenance_and_each_platforms_sbom_read_back_from_the_registry(fleet):
    """The cold build pushed BuildKit's provenance (mode=max) in the list, and attached a CycloneDX SBOM to each
    platform's manifest (oras, the referrers tag fallback): both read back here, by digest."""
    reg, _ = fleet
    manifest = FIGURES.get("manifest")
    if manifest is None:
        pytest.skip("needs the cold build")
    repo = manifest.rpartition("@")[0]
    run = subprocess.run(
        ["docker", "buildx", "imagetools", "inspect", manifest, "--format", "{{json .Provenance}}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    provenance = json.loads(run.stdout)
    assert set(provenance) == set(FIGURES["platforms"]), provenance.keys()
    for platform, found in provenance.items():
        slsa = found["SLSA"]
        args = slsa["invocation"]["parameters"]["args"]
        assert args.get("build-arg:SOURCE_DATE_EPOCH") == str(SMOKE.source_date_epoch), args  # the build's record
        assert "buildConfig" in slsa, f"{platform}: no buildConfig: not mode=max"
    sboms = {}
    for platform, digest in FIGURES["platforms"].items():
        (referrer,) = sbom_attach.attached(f"{repo}@{digest}")
        want = urllib.request.Request(
            f"http://{reg.host}/v2/miles/manifests/{referrer}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        )
        with urllib.request.urlopen(want, timeout=10) as r:
            artifact = json.loads(r.read())
        assert artifact["artifactType"] == sbom_attach.ARTIFACT_TYPE and artifact["subject"]["digest"] == digest
        doc = reg.get(f"/v2/miles/blobs/{artifact['layers'][0]['digest']}")
        arch = platform.rpartition("/")[2]
        debs = [c["purl"] for c in doc["components"] if c["purl"].startswith("pkg:deb/")]
        assert debs and all(f"arch={arch}" in p or "arch=all" in p for p in debs), (platform, debs[:5])
        sboms[platform] = referrer
    FIGURES["sboms"] = sboms


def test_engine_a_builds_from_the_registry_cache(fleet):
    reg, engine_b = fleet
    cold = FIGURES.get("cold_engine_b_s")
    if cold is None:
        pytest.skip("needs the cold build of the test before")
    proc, seconds = build(engine_b, "--registry", reg.host, "--cache-from", f"{reg.host}/cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    runs = [took for step, took in run_steps(proc.stdout) if step == "RUN"]
    assert runs and all(took == "cached" for took in runs), proc.stdout[-3000:]
    FIGURES.update(engine_a_from_cache_s=round(seconds), engine_a_cached_runs=f"{len(runs)}/{len(runs)}")
    FIGURES["cold_over_cached"] = round(cold / seconds, 1)
    uncached_run_on_engine_a(reg)


def test_an_image_engine_b_keeps_is_the_same_image_when_another_engine_builds_it(fleet):
    """A build the containerd store keeps comes back as an OCI archive with its file times rewritten to the build's
    SOURCE_DATE_EPOCH: smoke built with --no-cache on engine B and again on engine C (a third engine, started here,
    nothing cached) is one image ID. A hand change to it is then found by `verify --reproduce`'s comparison, reading
    the containerd store's compressed layers by their diff IDs."""
    import docker

    from toolkit.gates import reproduce

    reg, engine_b = fleet
    ref = f"{reg.host}/miles:smoke"
    proc, on_b = build(engine_b, "--builder", CONTEXT, "--registry", reg.host, "--no-cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    client_b = docker.DockerClient(base_url=engine_b.host)
    first = client_b.images.get(ref).id
    engine_c = SecondEngine(letter="c")
    try:
        engine_c.start()
        proc, on_c = build(engine_c, "--builder", CONTEXT, "--registry", reg.host)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        again = docker.DockerClient(base_url=engine_c.host).images.get(ref).id
    finally:
        engine_c.remove()
    assert again == first, f"engine C built {again}, engine B {first}"
    FIGURES.update(reproduced_digest=first, no_cache_engine_b_s=round(on_b), cold_engine_c_s=round(on_c))
    container = client_b.containers.run(
        first, ["sh", "-c", "echo '# by hand' >> /opt/venv/pyvenv.cfg"], detach=True, network_disabled=True
    )
    try:
        assert container.wait()["StatusCode"] == 0
        handmade = container.commit(repository="miles-reproduce-test", tag="handmade").id
    finally:
        container.remove(force=True)
    layers = [tuple(client_b.api.inspect_image(i)["RootFS"]["Layers"]) for i in (first, handmade)]
    wanted = reproduce.differing_layers(*layers)
    built, changed = (reproduce.read_image(client_b, i, wanted) for i in (first, handmade))
    lines = reproduce.report_lines(reproduce.compare(changed, built), changed)  # the image, then its rebuild
    edited = "opt/venv/pyvenv.cfg"
    top = len(layers[0]) + 1  # the layer the commit added
    assert lines[0] == f"not reproduced: layer {top} differs first in content: {edited} (in a layer only the image has)"
    assert f"    {edited}: in a layer only the image has" in lines, lines
    client_b.images.remove(handmade, force=True)


def test_verify_checks_each_platform_by_digest(fleet):
    reg, engine_b = fleet
    manifest = FIGURES.get("manifest")
    if manifest is None:
        pytest.skip("needs the cold build")
    started = time.monotonic()
    proc = run_build_py("verify", "--target", "smoke", "--image", manifest, env=engine_b.env(), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    verdicts = re.findall(
        r"^verify smoke on (\S+@sha256:[0-9a-f]{64}) \((linux/\w+)\): (PASS|FAIL)$", proc.stdout, re.M
    )
    assert sorted((p, v) for _, p, v in verdicts) == [("linux/amd64", "PASS"), ("linux/arm64", "PASS")]
    assert {ref.rpartition("@")[2] for ref, _, _ in verdicts} == set(FIGURES["platforms"].values())
    FIGURES["verify_both_platforms_s"] = round(time.monotonic() - started)


def test_bake_of_two_targets_on_engine_b_from_the_shared_cache(fleet, tmp_path):
    reg, engine_b = fleet
    if "manifest" not in FIGURES:
        pytest.skip("needs the cold build")
    bake = ROOT / "build" / f"fleet-bake-{os.getpid()}.json"
    try:
        proc = run_build_py(
            "bake", "--target", "smoke", "--target", "smoke-arm64", "--builder", CONTEXT,
            "--registry", reg.host, "--cache", f"{reg.host}/cache", "-o", str(bake), env=engine_b.env(),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads(bake.read_text())
        assert doc["target"]["smoke-arm64"]["platforms"] == ["linux/arm64"]
        assert any(c.startswith("docker-image://") for c in doc["target"]["smoke-arm64"]["contexts"].values())
        meta = tmp_path / "meta.json"
        started = time.monotonic()
        run = subprocess.run(
            ["docker", "--context", CONTEXT, "buildx", "bake", "-f", str(bake), "--push", "--progress", "plain",
             "--metadata-file", str(meta)],
            cwd=ROOT, env=engine_b.env(), capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-4000:]
        seconds = time.monotonic() - started
    finally:
        bake.unlink(missing_ok=True)
    digests = {name: m["containerimage.digest"] for name, m in json.loads(meta.read_text()).items()}
    assert set(digests) == {"smoke", "smoke-arm64"}
    runs = re.findall(r"^#\d+ \[[^\]]*stage-0 \d+/\d+\] RUN", run.stderr, re.M)
    cached = re.findall(r"^#(\d+) CACHED$", run.stderr, re.M)
    assert runs and len(cached) >= len(runs), run.stderr[-3000:]  # every RUN of both targets came from the cache
    arm = platforms_of(f"{reg.host}/miles@{digests['smoke-arm64']}")
    assert set(arm) == {"linux/arm64"}
    FIGURES.update(bake_two_targets_s=round(seconds), bake_digests=digests)


def test_engine_b_killed_mid_build_moves_no_tag(fleet):
    reg, engine_b = fleet
    before = {t: platforms_of(f"{reg.host}/miles:{t}") for t in reg.tags("miles")}
    cmd = [sys.executable, "build.py", "build", "--target", "smoke", "--set", f"platforms={TWO}", "--builder",
           CONTEXT, "--registry", reg.host, "--push", "--no-cache", "--progress", "plain"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=engine_b.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if re.search(r"\] RUN ", line):  # a RUN step started on engine B: take the engine away
            engine_b.kill()
            break
    rest, _ = proc.communicate(timeout=600)
    output = "".join(seen) + rest
    assert proc.returncode in (1, 3), output[-3000:]
    assert "build.py: " in output and "Traceback" not in output
    after = {t: platforms_of(f"{reg.host}/miles:{t}") for t in reg.tags("miles")}
    assert after == before  # no tag moved, every list still served whole
    uncached_run_on_engine_a(reg)
    FIGURES["killed_mid_build_exit"] = proc.returncode
