"""Each step kind has one home: its module in toolkit/steps/ (the contract, in its docstring) and the macro of the
same name in templates/partials/steps.j2 (its Dockerfile text). The docs' reference is generated from the classes."""

from __future__ import annotations

import re

from toolkit.render import TEMPLATES
from toolkit.spec import ROOT
from toolkit.steps import KINDS, reference


def test_every_kind_has_exactly_one_macro_and_every_macro_a_kind():
    text = (TEMPLATES / "partials" / "steps.j2").read_text()
    macros = set(re.findall(r"\{% macro (\w+)\(", text))
    helpers = {"flags", "env_words", "extra_index", "apply_patch", "prebuilt"}  # shared pieces, not kinds
    assert macros - helpers == set(KINDS)


def test_every_kind_states_its_contract():
    for kind in KINDS.values():
        doc = type(kind).__doc__ or ""
        assert doc.startswith(f"`{kind.key}"), kind.key  # the first line shows how the step is written
        for part in ("Reads:", "Leaves:", "May not:"):
            assert part in doc, (kind.key, part)


def test_the_docs_reference_is_generated_from_the_kinds():
    assert (ROOT / "docs" / "step-kinds.md").read_text() == reference(), (
        "docs/step-kinds.md is stale: python3 -m toolkit.steps > docs/step-kinds.md"
    )
