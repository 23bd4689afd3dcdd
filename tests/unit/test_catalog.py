"""The catalog over every family file: target names, aliases, and a variant name defined once."""

from __future__ import annotations

import pytest

from toolkit.errors import SpecError, UsageError
from toolkit.spec.catalog import load_catalog


def test_the_family_name_and_its_alias_resolve_to_the_default(write_spec, demo_text, images_dir):
    write_spec(demo_text)
    catalog = load_catalog(images_dir)
    assert catalog.aliases == {"demo": "a", "dm": "a"} and catalog.families == {"demo": ["a", "b"]}
    assert catalog.resolve("dm") is catalog.resolve("demo") is catalog.variants["a"]
    assert catalog.resolve("b").tag_suffix == "bee"


def test_a_variant_named_like_its_family_is_no_alias(write_spec, demo_text, images_dir):
    write_spec(demo_text.replace("  a: {}", "  demo: {}").replace("default: a", "default: demo"))
    assert load_catalog(images_dir).aliases == {"dm": "demo"}


def test_an_unknown_target_lists_the_known_ones(write_spec, demo_text, images_dir):
    write_spec(demo_text)
    with pytest.raises(UsageError) as e:
        load_catalog(images_dir).resolve("c")
    assert str(e.value) == "unknown target 'c'; known targets: a, b, demo, dm"


def test_a_variant_name_is_defined_once_across_files(write_spec, demo_text, images_dir):
    write_spec(demo_text)
    write_spec(demo_text.replace("family: demo", "family: other").replace("alias: dm", "alias: ot"), "other")
    with pytest.raises(SpecError) as e:
        load_catalog(images_dir)
    assert str(e.value) == "images/other.yaml: variants.a: also defined in images/demo.yaml"


def test_no_spec_files_is_a_usage_error(images_dir):
    with pytest.raises(UsageError, match="^no image specs found in images$"):
        load_catalog(images_dir)


def _other(demo_text, alias):
    """A second family, `other`, with variants x and y and the given alias."""
    return (
        demo_text.replace("family: demo", "family: other")
        .replace("alias: dm", f"alias: {alias}")
        .replace("default: a", "default: x")
        .replace("  a: {}", "  x: {}")
        .replace("  b:\n", "  y:\n")
    )


@pytest.mark.parametrize(
    "alias,problem",
    [
        ("b", "'b' is also a variant in images/demo.yaml"),  # resolve() reads aliases first: `--target b` would
        # build the other family's default
        ("dm", "'dm' is also an alias in images/demo.yaml"),  # otherwise the file that sorts last would win silently
    ],
)
def test_an_alias_means_one_thing(write_spec, demo_text, images_dir, alias, problem):
    write_spec(demo_text)
    write_spec(_other(demo_text, alias), "other")
    with pytest.raises(SpecError) as e:
        load_catalog(images_dir)
    assert str(e.value) == f"images/other.yaml: alias: {problem}"
