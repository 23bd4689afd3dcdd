"""A variant's shape is declared once, on its fields (toolkit/spec/variant.py): the schemas, the settable keys, what the
digest covers and `from_spec` all follow from the Keys, and a --set value is checked once, where it enters."""

from __future__ import annotations

import dataclasses

import pytest

from toolkit.errors import SpecError, UsageError
from toolkit.plan import build_plan as plan
from toolkit.plan.build_plan import apply_sets
from toolkit.spec import catalog as spec
from toolkit.spec import variant
from toolkit.spec.variant import FAMILY_FILE, KEYS, LAYER_FILE, VARIANT_ENTRY, Key, Variant

FIELDS = [f.name for f in dataclasses.fields(Variant)]


def test_every_variant_field_has_a_key():
    assert all(isinstance(f.metadata.get("key"), Key) for f in dataclasses.fields(Variant))
    assert list(KEYS) == FIELDS


def test_settable_is_the_fields_marked_settable_in_their_order():
    assert variant.SETTABLE == tuple(f for f in FIELDS if KEYS[f].settable)
    assert variant.SETTABLE == ("base", "args", "env", "pip", "components", "tag_suffix", "platforms")


def declared(place: str) -> set:
    return {k.spec_key or f for f, k in KEYS.items() if place in k.where}


def test_the_schemas_hold_exactly_the_declared_keys():
    assert set(variant.VARIANT) == declared(VARIANT_ENTRY)
    layer = {"description", "args", "env", "components", "pip", "artifacts", "source_date_epoch"}
    assert set(variant.LAYER) == declared(LAYER_FILE) == layer
    assert set(variant.FAMILY) == declared(FAMILY_FILE) | {"alias", "extends", "variants"}
    assert "tag_suffix" not in variant.FAMILY and "template" not in variant.VARIANT and "default" in variant.FAMILY
    required = tuple(k.spec_key or f for f, k in KEYS.items() if k.required)
    assert variant.REQUIRED_FAMILY == (*required, "variants")


def test_as_dict_holds_the_fields_that_shape_the_image(demo):
    a = demo["a"].as_dict()
    assert set(a) == {f for f in FIELDS if KEYS[f].shapes}
    assert not {"spec_file", "upstream_tags", "family_default"} & set(a)
    assert a["platforms"] == ["linux/amd64"] and isinstance(a["steps"], list)  # tuples as JSON lists


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("  a: {}", "  a: {bse: x}", "variants.a.bse: unknown key"),
        ("  a: {}", "  a: {template: cpu.Dockerfile.j2}", "variants.a.template: unknown key"),
        ("alias: dm", "alias: dm\ntag_suffix: x", "tag_suffix: unknown key"),
    ],
)
def test_a_key_not_declared_for_its_place_is_one_line(write_spec, demo_text, old, new, message):
    with pytest.raises(SpecError) as e:
        spec.load_family(write_spec(demo_text.replace(old, new, 1)))
    assert str(e.value) == f"images/demo.yaml: {message}"


def test_a_set_of_a_key_not_settable_is_refused(demo):
    with pytest.raises(UsageError) as e:
        apply_sets(demo["a"], ["description=x"])
    assert str(e.value).startswith("--set 'description=x': expected KEY=VALUE with KEY one of base, args, env,")


def test_a_set_value_with_a_control_character_is_refused_once(demo, monkeypatch):
    """One error line, from the first check that refuses it; a value its key's check refuses never reaches the text
    check, an accepted one passes it once, and the variant's own values (checked on load) not at all."""
    seen = []
    text_problem = plan.text_problem
    monkeypatch.setattr(plan, "text_problem", lambda value: seen.append(value) or text_problem(value))
    apply_sets(demo["a"], ["env.X=ok", "pip.torch=2.13.0"])
    assert seen == ["ok", "2.13.0"]
    seen.clear()
    with pytest.raises(SpecError) as e:
        apply_sets(demo["a"], ["args.MAX_JOBS=4", "args.X=a\u202eb"])
    assert str(e.value) == (
        "--set (images/demo.yaml variants.a): args.X: control character (newline, tab, ...) in 'a\\\\u202eb'"
    )
    assert seen == []
    with pytest.raises(SpecError) as e:
        apply_sets(demo["a"], ["env.X=" + "a" * 70_000])
    assert "\n" not in str(e.value) and "longer than the 65536 a Dockerfile line holds" in str(e.value)
    assert seen == ["a" * 70_000]


def test_only_the_entries_a_set_touches_are_checked(demo):
    """A sibling the set leaves alone passed on load; a bad one smuggled into the variant is not this set's error."""
    a = dataclasses.replace(demo["a"], env={"MODE": "plain", "bad-name": "x"})
    assert apply_sets(a, ["env.EXTRA=1"]).env == {"MODE": "plain", "bad-name": "x", "EXTRA": "1"}
    with pytest.raises(SpecError, match=r"env\.bad-name: names are identifiers"):
        apply_sets(a, ["env.bad-name=y"])


def spec_values_of(v: Variant) -> tuple[dict, dict, dict]:
    """(family mapping, variant values, resolved) as the loader holds them for `v`, each under its spec name."""
    family = {k.spec_key or f: getattr(v, f) for f, k in KEYS.items() if FAMILY_FILE in k.where}
    values = {k.spec_key or f: getattr(v, f) for f, k in KEYS.items() if VARIANT_ENTRY in k.where}
    resolved = {f: getattr(v, f) for f, k in KEYS.items() if not k.where}
    return family, values, {**resolved, "steps": list(v.steps), "upstream_tags": v.upstream_tags}


def test_from_spec_of_each_real_variant_is_what_load_catalog_gives():
    catalog = spec.load_catalog()
    assert len(catalog.variants) >= 10
    for v in catalog.variants.values():
        family, values, resolved = spec_values_of(v)
        assert Variant.from_spec(family, values, **resolved) == v
        assert Variant.from_spec(family, values, **resolved).digest == v.digest


def test_from_spec_fills_what_the_spec_leaves_out(demo):
    family, values, resolved = spec_values_of(demo["b"])
    for left_out in ("tag_suffix", "platforms", "description", "patches", "args"):
        del values[left_out]
    v = Variant.from_spec(family, values, **resolved)
    assert (v.tag_suffix, v.platforms, v.description, v.patches, v.args) == ("b", ("linux/amd64",), "", (), {})
