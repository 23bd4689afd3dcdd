"""The input hash (plan_hash): what CI compares across revisions and what the content-addressed tag names. It must
move with every input of the image (a pin, a template byte, a --set value, a context file, a source) and with
nothing else (the moving tag, the revision, the host's secrets, how the YAML is laid out)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from support import ROOT

from toolkit.plan.build_plan import make_plan
from toolkit.plan.sources import remote
from toolkit.render import dockerfile as render_mod
from toolkit.render.context import plan_hash
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog, load_family

OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def hashed(variant, **kw) -> str:
    plan = make_plan(variant, revision=kw.pop("revision", "r"), **kw)
    return plan_hash(plan, render(plan))


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_the_same_inputs_give_the_same_hash(catalog):
    h = hashed(catalog.resolve("rocm"))
    assert len(h) == 64 and int(h, 16) >= 0
    assert hashed(load_catalog().resolve("rocm")) == h


@pytest.mark.parametrize(
    "target,item",
    [
        ("miles-cpu", "pip.torch=2.14.2"),
        ("rocm", "pip.numpy=1.26.3"),
        ("rocm", f"components.miles.ref={OTHER_COMMIT}"),
        ("rocm", "base=rocm/sgl-dev:v0.5.16-rocm720-mi35x-20260731"),
    ],
)
def test_one_pin_changes_the_hash(catalog, target, item):
    assert hashed(catalog.resolve(target), sets=[item]) != hashed(catalog.resolve(target))


def test_a_commit_is_hashed_apart_from_the_dockerfile(catalog):
    """A git component's commit reaches BuildKit as a named context, never as a Dockerfile line: the hash covers it
    with the Dockerfile text held fixed."""
    variant = catalog.resolve("rocm")
    text = render(make_plan(variant, revision="r"))
    moved = make_plan(variant, sets=[f"components.miles.ref={OTHER_COMMIT}"], revision="r")
    assert OTHER_COMMIT not in render(moved)
    assert plan_hash(moved, text) != plan_hash(make_plan(variant, revision="r"), text)


def test_a_set_value_changes_the_hash_and_the_spec_value_does_not(catalog):
    variant = catalog.resolve("rocm")
    assert variant.args["MAX_JOBS"] == ""
    assert hashed(variant, sets=["args.MAX_JOBS=8"]) != hashed(variant, sets=["args.MAX_JOBS=16"])
    assert hashed(variant, sets=["args.MAX_JOBS="]) == hashed(variant)


def test_one_dockerfile_byte_changes_the_hash(catalog):
    plan = make_plan(catalog.resolve("smoke"), revision="r")
    text = render(plan)
    assert plan_hash(plan, text.replace("pip install", "pip  install", 1)) != plan_hash(plan, text)


@pytest.fixture
def templates(tmp_path, monkeypatch):
    """A private templates folder for render (its environment is cached: cleared on the way in and out)."""
    monkeypatch.setattr(render_mod, "TEMPLATES", tmp_path)
    render_mod.environment.cache_clear()
    yield tmp_path
    render_mod.environment.cache_clear()


def test_one_template_byte_changes_the_hash(catalog, templates):
    variant = dataclasses.replace(catalog.resolve("smoke"), template="t.j2")
    (templates / "t.j2").write_text("FROM {{ base }}\nRUN true\n")
    before = hashed(variant)
    (templates / "t.j2").write_text("FROM {{ base }}\nRUN true \n")
    render_mod.environment.cache_clear()
    assert hashed(variant) != before


def test_a_context_file_changes_the_hash_by_content_and_by_name(catalog, tmp_path):
    plan = make_plan(catalog.resolve("smoke"), revision="r")
    text, f = render(plan), tmp_path / "f.py"
    f.write_text("X = 1\n")
    first = plan_hash(plan, text, {"bridge/f.py": f})
    assert plan_hash(plan, text, {"bridge/g.py": f}) != first
    f.write_text("X = 2\n")
    assert plan_hash(plan, text, {"bridge/f.py": f}) != first


def test_the_gate_config_is_hashed(catalog):
    variant = catalog.resolve("smoke")
    weaker = dataclasses.replace(variant, gates={k: v for k, v in variant.gates.items() if k != "commands"})
    assert hashed(weaker) != hashed(variant)


def test_a_local_source_replaces_the_pin_in_the_hash(catalog):
    plan = make_plan(catalog.resolve("rocm"), revision="r")
    text = render(plan)
    pinned = [remote(n, c) for n, c in sorted(plan.variant.components.items()) if "git" in c]
    assert plan_hash(plan, text, sources=pinned) == plan_hash(plan, text)
    local = [dataclasses.replace(s, digest="sha256:" + "0" * 64) if s.name == "miles" else s for s in pinned]
    assert plan_hash(plan, text, sources=local) != plan_hash(plan, text)


def test_nothing_about_the_host_or_the_moving_tag_is_hashed(catalog, tmp_path):
    variant = catalog.resolve("cuda")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert hashed(
        variant,
        tag="elsewhere/miles:mine",
        revision="other-dirty",
        secrets=[("tok", str(ca))],
        pip_ca=str(ca),
        no_cache=True,
        progress="plain",
    ) == hashed(variant)


def _reversed(node):
    if isinstance(node, dict):
        return {k: _reversed(v) for k, v in reversed(list(node.items()))}
    if isinstance(node, list):
        return [_reversed(v) for v in node]
    return node


def test_the_yaml_layout_is_not_hashed(catalog, images_dir):
    """Mapping order, flow or block style and comments change no byte of the image."""
    data = yaml.safe_load((ROOT / "images" / "rocm.yaml").read_text())
    path = images_dir / "rocm.yaml"
    path.write_text(yaml.safe_dump(_reversed(data), sort_keys=False, default_flow_style=True, width=10_000))
    (images_dir / "rocm.lock.json").write_text((ROOT / "images" / "rocm.lock.json").read_text())
    relaid = load_family(path)["rocm720-mi35x"]
    original = catalog.resolve("rocm720-mi35x")
    assert list(relaid.env) != list(original.env)  # really in another order
    assert relaid.digest == original.digest and hashed(relaid) == hashed(original)


def content(variant, **kw) -> str:
    from toolkit.render.context import content_hash

    return content_hash(make_plan(variant, revision="r", **kw))


def test_the_content_hash_is_blind_to_name_and_platforms_only(catalog):
    """The gate step's nonce derives from the content hash: a build for other platforms, or the `-arm64` twin of a
    target, must reuse a gate layer from a shared cache (the fleet's cache test), while any change to what goes into
    the image, or to the gates, must give another nonce."""
    smoke = content(catalog.resolve("smoke"))
    assert content(catalog.resolve("smoke-arm64")) == smoke
    assert content(catalog.resolve("smoke"), sets=["platforms=linux/amd64,linux/arm64"]) == smoke
    assert hashed(catalog.resolve("smoke-arm64")) != hashed(catalog.resolve("smoke"))  # the input hash is not blind
    variant = catalog.resolve("smoke")
    assert content(dataclasses.replace(variant, env={**variant.env, "EXTRA": "1"})) != smoke
    gates = dict(variant.gates, imports=[*variant.gates["imports"], "json"])
    assert content(dataclasses.replace(variant, gates=gates)) != smoke
