"""Each step kind has one home: its module in toolkit/steps/ (the contract, in its docstring, and its Dockerfile
lines). The docs' reference is generated from the classes."""

from __future__ import annotations

from toolkit.render.dockerfile import TEMPLATES
from toolkit.spec.catalog import ROOT
from toolkit.steps import KINDS, Kind, reference


def test_every_kind_is_one_module_that_emits_its_own_lines():
    for kind in KINDS.values():
        assert type(kind).__module__ == f"toolkit.steps.{kind.key}", kind.key
        assert type(kind).lines is not Kind.lines, kind.key
    text = (TEMPLATES / "partials" / "steps_list.j2").read_text()
    assert "macro" not in text and "import" not in text  # the template only places the lines


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
