"""make_plan: everything a build needs, decided once from the variant and the command line."""

from __future__ import annotations

import re

import pytest

from toolkit.engine.registry import hash_tag
from toolkit.errors import UsageError, short
from toolkit.plan.build_plan import SECRET_PIP_CA, make_plan, parse_secret


def test_the_image_is_the_repository_and_tag_suffix_unless_a_tag_is_given(demo):
    assert make_plan(demo["a"], revision="r").image == "miles:a"
    assert make_plan(demo["b"], revision="r").image == "miles:bee"
    assert make_plan(demo["b"], tag="reg.example/x:y", revision="r").image == "reg.example/x:y"


def test_the_content_addressed_tag_follows_the_variant_not_the_moving_tag(demo):
    plan = make_plan(demo["b"], tag="other:t", revision="r")
    assert hash_tag(plan, "0123456789ab") == "miles:bee-0123456789ab"
    assert hash_tag(plan, "0123456789ab", "ghcr.io/org") == "ghcr.io/org/miles:bee-0123456789ab"


def test_labels_record_the_revision(demo):
    assert make_plan(demo["a"], revision="abc-dirty").labels == {
        "org.opencontainers.image.revision": "abc-dirty",
        "org.opencontainers.image.source": "miles-image-toolkit",
    }


def test_the_host_ca_is_a_secret_unless_one_is_named_already(demo):
    assert make_plan(demo["a"], pip_ca="/ca.pem", revision="r").secrets == ((SECRET_PIP_CA, "/ca.pem"),)
    given = (SECRET_PIP_CA, "/mine.pem")
    assert make_plan(demo["a"], secrets=[given], pip_ca="/ca.pem", revision="r").secrets == (given,)
    assert make_plan(demo["a"], revision="r").secrets == ()


def test_sets_reach_the_planned_variant(demo):
    assert make_plan(demo["a"], sets=["args.MAX_JOBS=2"], revision="r").variant.args["MAX_JOBS"] == "2"


def test_sources_name_git_components_only(demo, tmp_path):
    assert make_plan(demo["a"], sources=[f"lib={tmp_path}"], revision="r").sources == {"lib": str(tmp_path)}
    with pytest.raises(UsageError) as e:
        make_plan(demo["a"], sources=[f"nope={tmp_path}"], revision="r")
    assert str(e.value) == f"--source 'nope={tmp_path}': 'nope' is not a git component of a (lib)"


def test_parse_secret(tmp_path):
    src = tmp_path / "token"
    src.write_text("t")
    assert parse_secret(f"id=tok,src={src}") == ("tok", str(src))
    assert parse_secret(f"type=file,id=tok,source={src}") == ("tok", str(src))
    for text, problem in [
        (f"src={src}", "expected id=NAME,src=FILE"),
        (f"id=tok,src={src},mode=1", "expected"),
        (f"id=a b,src={src}", "the id is letters"),
        ("id=tok,src=/no/such", "no such file"),
    ]:
        with pytest.raises(UsageError, match=f"^--secret {re.escape(short(text))}: {problem}"):
            parse_secret(text)
