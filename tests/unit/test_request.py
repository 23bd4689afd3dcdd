"""One build request without an engine: the argv and the bake target of one Invocation agree, `prepare` stages
before it asks any engine (a bad `--source` is exit 2 with none), and a `--source` and a `--set` reach the
Dockerfile and the invocation through it."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from toolkit.cleanup import Scope
from toolkit.engine import builders, local_images
from toolkit.engine import docker_engine as engine
from toolkit.engine.docker_engine import BuildSite
from toolkit.engine.invocation import Invocation
from toolkit.engine.registry import with_registry
from toolkit.errors import UsageError
from toolkit.plan.build_plan import make_plan
from toolkit.render.context import Context
from toolkit.request import BuildRequest, prepare
from toolkit.spec.catalog import load_catalog

HASH = "0123456789ab" + "c" * 52
IMAGE = ("miles-base:t", "docker-image://127.0.0.1:5000/miles-base@sha256:" + "a" * 64)


def invocation(tmp_path) -> Invocation:
    """Every field set: named contexts of both kinds, a secret, two platforms, registry cache, an extra tag."""
    plan = make_plan(load_catalog().resolve("rocm"), secrets=[("pip-ca", "/ca.pem")], revision="r" * 40)
    ctx = Context(path=tmp_path / "ctx", dockerfile=tmp_path / "ctx" / "Dockerfile", input_hash=HASH)
    site = builders.site(None, plan, (IMAGE,), "r.example/cache", None)
    built = Invocation.of(
        with_registry(plan, "r.example/ns"), ctx, site, "r.example/ns", extra_tags=("r.example/ns/miles:dev",)
    )
    return replace(built, platforms=("linux/amd64", "linux/arm64"), contexts=(("src-x", "y"),))


def options(argv: list, flag: str) -> list:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def pairs(words) -> dict:
    return dict(word.split("=", 1) for word in words)


def test_the_argv_and_the_bake_target_of_one_invocation_agree(tmp_path):
    inv = invocation(tmp_path)
    argv, target = inv.argv(files=("--iidfile", "/tmp/iid")), inv.bake_target()
    assert argv[:4] == ["docker", "buildx", "build", "--progress=plain"]
    assert argv[-1] == target["context"] == str(tmp_path / "ctx") and argv[-3:-1] == ["--iidfile", "/tmp/iid"]
    assert Path(options(argv, "-f")[0]) == Path(target["context"], target["dockerfile"])
    assert options(argv, "--platform") == [",".join(target["platforms"])] == ["linux/amd64,linux/arm64"]
    assert pairs(options(argv, "--build-context")) == target["contexts"] == {"src-x": "y", IMAGE[0]: IMAGE[1]}
    assert pairs(options(argv, "--build-arg")) == target["args"] and target["args"]
    assert options(argv, "--secret") == target["secret"] == ["id=pip-ca,src=/ca.pem"]
    assert pairs(options(argv, "--label")) == target["labels"] and target["labels"]["io.miles.input-hash"] == HASH
    assert options(argv, "--cache-from") == target["cache-from"] == ["type=registry,ref=r.example/cache:rocm720-mi35x"]
    assert options(argv, "--cache-to") == target["cache-to"]
    assert (
        target["tags"]
        == list(inv.tags)
        == [
            "r.example/ns/miles:rocm720-mi35x",
            f"r.example/ns/miles:rocm720-mi35x-{HASH[:12]}",
            "r.example/ns/miles:dev",
        ]
    )
    assert "--output" not in argv  # tags move after the gates, through the engine
    pushed = inv.pushed().argv()
    assert options(pushed, "--output") == ['type=image,push=true,"name=' + ",".join(target["tags"]) + '"']
    assert inv.hash_tag == target["tags"][1] and inv.moving == (target["tags"][0], target["tags"][2])


def test_no_cache_is_an_option_of_the_build_run(tmp_path):
    inv = invocation(tmp_path)
    assert "--no-cache" not in inv.argv()
    uncached = replace(inv, no_cache=True)
    assert "--no-cache" in uncached.argv() and uncached.bake_target() == inv.bake_target()


@pytest.fixture
def engine_refused(monkeypatch):
    """Every way to reach an engine fails the test: what `prepare` refuses, it refuses before asking one."""

    def asked(*args, **kwargs):
        raise AssertionError("an engine was asked")

    for module, name in ((engine, "connect"), (engine, "buildx_cmd"), (builders, "resolve")):
        monkeypatch.setattr(module, name, asked)


def escaping_tarball(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        member = tarfile.TarInfo("../outside.py")
        member.size = 2
        tar.addfile(member, io.BytesIO(b"x\n"))
    return path


@pytest.mark.parametrize("command", ["build", "bake"])
def test_a_source_that_cannot_be_staged_is_exit_2_before_any_engine(command, tmp_path, engine_refused):
    request = BuildRequest(command, ("miles-cpu",), sources=(f"miles={escaping_tarball(tmp_path / 'm.tar.gz')}",))
    with Scope() as scope, pytest.raises(UsageError) as e:
        prepare(request, scope, log=lambda line: None)
    assert e.value.exit_code == 2 and "--source" in str(e.value)


def test_a_bake_of_targets_made_elsewhere_asks_no_engine(engine_refused):
    # cu13 compiles kernels for arm64: with no --builder, this machine's x86 would only emulate it (refused, before
    # any engine is asked) unless emulation is allowed
    with Scope() as scope, pytest.raises(UsageError, match="^cu13 compiles kernels .* --builder NAME"):
        prepare(BuildRequest("bake", ("cu13",), registry="org"), scope, log=lambda line: None)
    with Scope() as scope:
        request = BuildRequest("bake", ("cu13", "rocm"), registry="org", allow_emulation=True)
        prepared = prepare(request, scope, log=lambda line: None)
        (cu13, rocm) = prepared.targets
        assert prepared.builder is None and prepared.client is None
        assert cu13.invocation.context == cu13.ctx.path.parent / cu13.ctx.short_hash  # where it will be kept
        assert rocm.invocation.tags[:2] == ("org/miles:rocm720-mi35x", f"org/miles:rocm720-mi35x-{rocm.ctx.short_hash}")


def test_a_source_and_a_set_reach_the_dockerfile_and_the_invocation(tmp_path, monkeypatch):
    tree = tmp_path / "miles"
    (tree / "miles").mkdir(parents=True)
    (tree / "miles" / "__init__.py").write_text("")
    made = []
    monkeypatch.setattr(engine, "connect", lambda host=None: "client")
    monkeypatch.setattr(engine, "buildx_cmd", lambda: ["docker", "buildx"])
    monkeypatch.setattr(builders, "resolve", lambda name, client=None: builders.Builder(None, "docker"))
    monkeypatch.setattr(local_images, "ensure", lambda client, variant, platforms, **kw: made.append(variant.name))
    request = BuildRequest("build", ("miles-cpu",), sources=(f"miles={tree}",), sets=("env.REQUEST_MARK=on",))
    with Scope() as scope:
        (target,) = prepare(request, scope, log=lambda line: None).targets
        assert "REQUEST_MARK" in target.ctx.dockerfile.read_text()
        staged_tree = Path(dict(target.invocation.contexts)["src-miles"])
        assert (staged_tree / "miles" / "__init__.py").is_file() and staged_tree != tree
        argv = target.invocation.argv()
        assert f"src-miles={staged_tree}" in options(argv, "--build-context")
        assert argv[-1] == str(target.ctx.path)
    assert made == (["miles-cpu"] if local_images.names(target.plan.variant) else [])
    assert target.invocation.site == BuildSite()
