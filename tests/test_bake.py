"""The bake file: a pure function of plans and staged contexts (unit), what buildx itself reads from it (`bake --print`
on every target), and one real bake build of smoke, whose gates still guard the tags."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import MILES_COMMIT, SNAPSHOT, run_build_py

from toolkit.engine.bake import bake_file, target_name
from toolkit.engine.builders import site
from toolkit.engine.invocation import Invocation
from toolkit.engine.registry import with_registry
from toolkit.errors import UsageError
from toolkit.gates.report import gate_nonce
from toolkit.plan.build_plan import make_plan
from toolkit.render.context import Context
from toolkit.spec.catalog import load_catalog

HASH = "0123456789ab" + "c" * 52


def staged_for(tmp_path, names, secrets=(), hashes=None):
    catalog = load_catalog()
    staged = []
    for name in names:
        plan = make_plan(catalog.resolve(name), secrets=secrets, revision="r" * 40)
        path = tmp_path / plan.name / "context"
        staged.append(
            (plan, Context(path=path, dockerfile=path / "Dockerfile", input_hash=(hashes or {}).get(name, HASH)))
        )
    return staged


def invocations(staged, registry=None, cache=None, cache_from=None):
    """(name, Invocation) per staged target, as `build.py bake` makes them (no builder: the bake file's own)."""
    return [
        (
            plan.name,
            Invocation.of(with_registry(plan, registry), ctx, site(None, plan, (), cache, cache_from), registry),
        )
        for plan, ctx in staged
    ]


def test_every_target_becomes_a_bake_target_with_tags_labels_platforms(tmp_path):
    names = sorted(load_catalog().variants)
    doc = bake_file(invocations(staged_for(tmp_path, names, secrets=[("pip-ca", "/ca.pem")])))
    assert doc["group"] == {"default": {"targets": [target_name(n) for n in names]}}
    assert set(doc["target"]) == {target_name(n) for n in names}
    catalog = load_catalog()
    for name in names:
        t, v = doc["target"][target_name(name)], catalog.variants[name]
        assert t["context"] == str(tmp_path / name / "context") and t["dockerfile"] == "Dockerfile"
        assert t["platforms"] == list(v.platforms)
        keep_git = {"BUILDKIT_CONTEXT_KEEP_GIT_DIR": "1"} if t.get("contexts") else {}  # git trees keep their .git
        nonce = {"MILES_GATE_NONCE": gate_nonce(HASH)}  # the gate step's, derived from the input hash
        clock = {"SOURCE_DATE_EPOCH": str(v.source_date_epoch)}  # the spec's build clock, for BuildKit and the steps
        assert t["args"] == {**v.args, **keep_git, **nonce, **clock}
        assert t["tags"] == [f"{v.repository}:{v.tag_suffix}", f"{v.repository}:{v.tag_suffix}-{HASH[:12]}"]
        assert t["labels"]["io.miles.input-hash"] == HASH
        assert t["labels"]["org.opencontainers.image.revision"] == "r" * 40
        assert t["secret"] == ["id=pip-ca,src=/ca.pem"]
        assert "cache-from" not in t and "cache-to" not in t
    assert doc["target"]["cu13"]["platforms"] == ["linux/amd64", "linux/arm64"]


def test_registry_and_cache_refs(tmp_path):
    staged = staged_for(tmp_path, ["rocm", "smoke"])
    doc = bake_file(invocations(staged, registry="ghcr.io/org/", cache="ghcr.io/org/miles-cache"))
    rocm = doc["target"]["rocm720-mi35x"]
    assert rocm["tags"] == ["ghcr.io/org/miles:rocm720-mi35x", f"ghcr.io/org/miles:rocm720-mi35x-{HASH[:12]}"]
    assert rocm["cache-from"] == ["type=registry,ref=ghcr.io/org/miles-cache:rocm720-mi35x"]
    assert rocm["cache-to"] == ["type=registry,ref=ghcr.io/org/miles-cache:rocm720-mi35x,mode=max"]
    assert "secret" not in rocm  # no secret asked for, none invented


def test_bake_file_is_pure_and_names_are_sanitised(tmp_path):
    staged = invocations(staged_for(tmp_path, ["smoke", "rocm"]))
    assert json.dumps(bake_file(staged)) == json.dumps(bake_file(staged))
    assert target_name("rocm7.2-mi35x") == "rocm7_2-mi35x"
    with pytest.raises(UsageError, match="two targets"):
        bake_file([staged[0], staged[0]])


def bake_print(path: Path, *targets) -> dict:
    proc = subprocess.run(
        ["docker", "buildx", "bake", "--print", "-f", str(path), *targets], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.docker
def test_buildx_reads_the_generated_file_for_every_target(tmp_path):
    names = sorted(load_catalog().variants)
    out = tmp_path / "bake.json"
    args = [a for n in names for a in ("--target", n)]
    proc = run_build_py(
        "bake",
        *args,
        "--registry",
        "registry.example:5000/ml",
        "--cache",
        "registry.example:5000/ml/cache",
        "--allow-emulation",  # cu13's kernels for arm64 on this x86 machine: refused without it (tests/unit)
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = json.loads(out.read_text())
    printed = bake_print(out)
    assert printed["group"]["default"]["targets"] == [target_name(n) for n in names]
    assert set(printed["target"]) == set(ours["target"])
    for name, t in printed["target"].items():
        mine = ours["target"][name]
        assert Path(t["context"]) == Path(mine["context"]) and Path(mine["context"], "Dockerfile").is_file()
        assert t["dockerfile"] == "Dockerfile"
        assert t["platforms"] == mine["platforms"]
        assert t["tags"] == mine["tags"] and t["tags"][0].startswith("registry.example:5000/ml/miles:")
        assert t["labels"] == mine["labels"] and len(t["labels"]["io.miles.input-hash"]) == 64
        assert t.get("args", {}) == mine["args"]
        assert t.get("secret", []) == mine.get("secret", [])
        assert t["cache-from"] == mine["cache-from"] and t["cache-to"] == mine["cache-to"]
    # A subset selects just those targets, as a matrix job does.
    assert list(bake_print(out, "smoke")["target"]) == ["smoke"]


@pytest.mark.docker
@pytest.mark.skipif(
    not SNAPSHOT.exists(), reason="the upstream miles snapshot (shared/upstream) is not beside the repo"
)
def test_bake_builds_a_local_source_for_the_targets_that_have_it(tmp_path):
    pinned, local = tmp_path / "pinned.json", tmp_path / "local.json"
    targets = ("--target", "miles-cpu", "--target", "smoke")
    for out, extra in ((pinned, ()), (local, ("--source", f"miles={SNAPSHOT}"))):
        proc = run_build_py("bake", *targets, *extra, "-o", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    before, after = (json.loads(p.read_text())["target"] for p in (pinned, local))
    context = Path(after["miles-cpu"]["contexts"]["src-miles"])
    assert (context / "miles" / "backends" / "fsdp_utils" / "actor.py").is_file()
    assert context.parent.name == Path(after["miles-cpu"]["context"]).name + ".sources"
    assert after["miles-cpu"]["labels"]["io.miles.source.miles"].startswith(f"local {SNAPSHOT.name} sha256:")
    assert before["miles-cpu"]["contexts"]["src-miles"].endswith("#" + MILES_COMMIT)
    assert after["miles-cpu"]["tags"][1] != before["miles-cpu"]["tags"][1]  # the input hash follows the source
    assert after["smoke"] == before["smoke"]  # smoke has no miles: untouched
    assert Path(bake_print(local, "miles-cpu")["target"]["miles-cpu"]["contexts"]["src-miles"]) == context


@pytest.mark.docker
def test_real_bake_build_of_smoke_tags_only_a_gated_image(tmp_path, docker_client, project_copy):
    registry = "bake-test.invalid"  # a name only: nothing is pushed, and miles:smoke is left alone
    out = tmp_path / "bake.json"
    proc = run_build_py("bake", "--target", "smoke", "--registry", registry, "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    target = json.loads(out.read_text())["target"]["smoke"]
    meta = tmp_path / "meta.json"
    run = subprocess.run(
        ["docker", "buildx", "bake", "-f", str(out), "--metadata-file", str(meta), "--progress", "plain"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "-m verify --config gates.json" in run.stderr  # the gate step is part of the bake build
    try:
        image = docker_client.images.get(target["tags"][1])
        assert image.labels["io.miles.input-hash"] == target["labels"]["io.miles.input-hash"]
        assert image.labels["io.miles.variant"] == "smoke"
        assert json.loads(meta.read_text())["smoke"]["containerimage.digest"] == image.id
        assert docker_client.images.get(target["tags"][0]).id == image.id
    finally:
        for ref in target["tags"]:
            subprocess.run(["docker", "rmi", ref], capture_output=True)

    # The same bake of a project whose bridge does not compile: the gate fails the build and no tag appears.
    init = project_copy / "bridge" / "src" / "sglang_attn_bridge" / "__init__.py"
    init.write_text(init.read_text() + "\ndef broken(:\n")
    broken = tmp_path / "broken.json"
    proc = run_build_py("bake", "--target", "smoke", "--registry", registry, "-o", str(broken), cwd=project_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tags = json.loads(broken.read_text())["target"]["smoke"]["tags"]
    run = subprocess.run(
        ["docker", "buildx", "bake", "-f", str(broken), "--progress", "plain"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode != 0
    assert "FAIL" in run.stderr and "sglang_attn_bridge" in run.stderr
    for ref in tags:
        assert subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode != 0, ref


def test_bake_cli_writes_json_to_stdout_and_rejects_unknown_targets():
    proc = run_build_py("bake", "--target", "rocm", "--target", "rocm720-mi35x", "--registry", "r.example/ns")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # the log lines went to stderr
    assert doc["group"]["default"]["targets"] == ["rocm720-mi35x"]  # an alias and its variant are one target
    assert doc["target"]["rocm720-mi35x"]["tags"][0] == "r.example/ns/miles:rocm720-mi35x"
    assert "target rocm720-mi35x: input hash" in proc.stderr
    proc = run_build_py("bake", "--target", "no-such-target")
    assert proc.returncode == 2 and "unknown target" in proc.stderr
