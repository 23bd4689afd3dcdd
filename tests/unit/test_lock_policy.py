"""The spec side of the lock, in-process: a tracked component takes its `ref` from images/<family>.lock.json when
the family loads, each way that can go wrong is one SpecError line naming the file, key and the fix, and the
lock's pins (not its policy text) reach the variant, its input hash and its labels."""

from __future__ import annotations

import pytest

from toolkit.errors import SpecError
from toolkit.lock import file as lock_file
from toolkit.plan.build_plan import make_plan
from toolkit.plan.sources import apply_refs
from toolkit.render.context import build_labels, plan_hash
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_family

URL = "https://example.com/org/lib.git"
C1, C2 = "c1" * 20, "c2" * 20
SHA = "a" * 64


def tracked(demo_text, track="{branch: main}", extra=""):
    return demo_text.replace(
        f"lib: {{git: {URL}, ref: 0123456789abcdef0123456789abcdef01234567}}",
        f"lib: {{git: {URL}, track: {track}, why: follows main{extra}}}",
    )


def write_lock(images_dir, sources=None, artifacts=None, family="demo"):
    lock = lock_file.empty(family)
    lock["sources"] = sources or {}
    lock["artifacts"] = artifacts or {}
    lock_file.write(images_dir / f"{family}.lock.json", lock)


def entry(commit=C1, policy=None):
    return {"git": URL, "policy": policy or {"branch": "main"}, "commit": commit, "via": "ls-remote"}


def test_a_tracked_component_takes_its_commit_from_the_lock(write_spec, demo_text, images_dir):
    write_lock(images_dir, {"lib": entry()})
    variants = load_family(write_spec(tracked(demo_text)))
    assert variants["a"].components["lib"] == variants["b"].components["lib"] == {"git": URL, "ref": C1}


def test_the_lock_moves_the_input_hash_and_the_label_the_policy_text_does_not(write_spec, demo_text, images_dir):
    write_lock(images_dir, {"lib": entry()})
    path = write_spec(tracked(demo_text))

    def hashed():
        plan = make_plan(load_family(path)["a"], revision="r")
        return plan_hash(plan, render(plan))

    first = hashed()
    path.write_text(tracked(demo_text).replace("why: follows main", "why: another reason"))
    assert hashed() == first
    write_lock(images_dir, {"lib": entry(C2)})
    assert hashed() != first


@pytest.mark.parametrize(
    "lock, track, words",
    [
        (None, "{branch: main}", "components.lib.track: no pin in images/demo.lock.json: run `python3 build.py lock"),
        ({}, "{branch: main}", "no pin in images/demo.lock.json"),
        ({"lib": entry()}, "{tag: v1}", "images/demo.lock.json pins https://example.com/org/lib.git for branch main"),
        ({"lib": entry()}, "{branch: main, tag: v1}", "expected branch, tag, commit or commit + branch"),
        ({"lib": entry()}, "{commit: abc}", "components.lib.track.commit: not a 40-hex commit"),
        ({"lib": entry()}, "{branch: -x}", "components.lib.track.branch: not a ref name git accepts"),
        ({"lib": entry()}, "{branch: a..b}", "not a ref name git accepts"),
    ],
)
def test_a_tracked_component_without_a_matching_pin_is_one_line(write_spec, demo_text, images_dir, lock, track, words):
    if lock is not None:
        write_lock(images_dir, lock)
    with pytest.raises(SpecError) as e:
        load_family(write_spec(tracked(demo_text, track)))
    assert words in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("images/demo.yaml: ")


def test_track_and_ref_together_are_refused(write_spec, demo_text, images_dir):
    write_lock(images_dir, {"lib": entry()})
    with pytest.raises(SpecError, match=r"components\.lib\.ref: with `track`, the pin comes from the lock"):
        load_family(write_spec(tracked(demo_text, extra=f", ref: {C2}")))


def test_variants_that_track_one_name_differently_are_refused(write_spec, demo_text, images_dir):
    text = tracked(demo_text).replace("  a: {}", "  a:\n    components: {lib: {track: {tag: v1}}}")
    with pytest.raises(SpecError, match="a family's lock holds one pin per component"):
        load_family(write_spec(text))


def test_a_broken_lock_file_is_a_spec_error_naming_it(write_spec, demo_text, images_dir):
    (images_dir / "demo.lock.json").write_text('{"schema": 9, "family": "demo"}\n')
    with pytest.raises(SpecError, match=r"images/demo\.lock\.json: schema: schema 9; this toolkit reads schema 1"):
        load_family(write_spec(tracked(demo_text)))
    (images_dir / "demo.lock.json").write_text("{not json")
    with pytest.raises(SpecError, match=r"images/demo\.lock\.json: line 1: not JSON"):
        load_family(write_spec(tracked(demo_text)))


def test_an_untracked_component_keeps_its_hand_written_ref(demo):
    assert demo["a"].components["lib"]["ref"] == "0123456789abcdef0123456789abcdef01234567"


def test_artifacts_reach_the_variant_and_the_labels_from_the_lock(write_spec, demo_text, images_dir):
    url = "https://example.com/w-1.0-py3-none-any.whl"
    text = demo_text.replace("variants:\n", f"artifacts:\n  wheel: {{url: {url}, why: prebuilt}}\nvariants:\n")
    text = text.replace(
        "steps: [{pip: [torch]}, {source: lib}, patches]",
        "steps: [{pip: [torch]}, {source: lib}, patches, {artifact: wheel, to: /opt/w.whl}]",
    )
    path = write_spec(text)
    assert load_family(path)["a"].artifacts == {"wheel": {"pending": True, "url": url}}
    write_lock(images_dir, artifacts={"wheel": {"policy": {"url": url + "?old"}, "url": url, "size": 3, "sha256": SHA}})
    with pytest.raises(SpecError, match="artifacts.wheel: images/demo.lock.json pins another policy for it"):
        load_family(path)
    write_lock(images_dir, artifacts={"wheel": {"policy": {"url": url}, "url": url, "size": 3, "sha256": SHA}})
    variant = load_family(path)["a"]
    assert variant.artifacts == {"wheel": {"url": url, "size": 3, "sha256": SHA}}
    plan = make_plan(variant, revision="r")
    first = plan_hash(plan, render(plan))

    class Ctx:
        input_hash, sources = first, ()

    assert build_labels(plan, Ctx())["io.miles.source.wheel"] == f"{url} sha256:{SHA}"
    write_lock(images_dir, artifacts={"wheel": {"policy": {"url": url}, "url": url, "size": 3, "sha256": "b" * 64}})
    plan = make_plan(load_family(path)["a"], revision="r")
    assert plan_hash(plan, render(plan)) != first


def test_ref_overrides_one_commit_for_one_build(demo):
    from toolkit.errors import UsageError

    variant = demo["a"]
    moved = apply_refs(variant, [f"lib={C2}"])
    assert moved.components["lib"] == {"git": URL, "ref": C2} and variant.components["lib"]["ref"] != C2
    plans = [make_plan(v, revision="r") for v in (variant, moved)]
    assert plan_hash(plans[0], render(plans[0])) != plan_hash(plans[1], render(plans[1]))
    for items, sources, words in [
        (["lib=main"], (), "expected NAME=COMMIT"),
        ([f"nope={C2}"], (), "'nope' is not a git component of a \\(lib\\)"),
        ([f"lib={C1}", f"lib={C2}"], (), "given twice"),
        ([f"lib={C2}"], ["lib=/tmp"], "also given --source lib"),
    ]:
        with pytest.raises(UsageError, match=words):
            apply_refs(variant, items, sources)


def test_lock_table_rows_name_every_entry_either_side_holds():
    before = {"kept": 1, "moved": 2, "gone": 3}
    now = {"kept": 1, "moved": 4, "new": 5}
    rows = lock_file.rows("f/pip", before, now, lambda e: "-" if e is None else f"<{e}>")
    assert rows == [
        ["f/pip/gone", "<3>", "-", "dropped"],
        ["f/pip/kept", "<1>", "<1>", "no"],
        ["f/pip/moved", "<2>", "<4>", "yes"],
        ["f/pip/new", "-", "<5>", "yes"],
    ]
    assert lock_file.rows("f/closure", None, {"a": 1}, str) == [["f/closure/a", "None", "1", "yes"]]
