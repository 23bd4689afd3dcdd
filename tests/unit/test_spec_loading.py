"""Loading one family file: variants inherit the family's values and override them (mappings key by key, lists and
scalars whole), and a file that cannot be a spec is one SpecError line naming it."""

from __future__ import annotations

import re

import pytest

from toolkit.errors import SpecError
from toolkit.spec.catalog import MAX_SPEC_BYTES, load_family, merge
from toolkit.spec.variant import REQUIRED_FAMILY

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_mappings_merge_key_by_key_and_everything_else_replaces():
    base = {"args": {"A": "1", "B": "2"}, "platforms": ["linux/amd64"], "base": "x:1", "gates": {"p": {"q": 1}}}
    over = {"args": {"B": "3"}, "platforms": ["linux/arm64"], "base": "y:2", "gates": {"p": {"r": 2}}}
    assert merge(base, over) == {
        "args": {"A": "1", "B": "3"},
        "platforms": ["linux/arm64"],
        "base": "y:2",
        "gates": {"p": {"q": 1, "r": 2}},
    }


def test_merge_copies_so_variants_never_share_a_mapping():
    base, over = {"args": {"A": "1"}}, {"env": {"E": "1"}}
    out = merge(base, over)
    out["args"]["A"], out["env"]["E"] = "changed", "changed"
    assert base == {"args": {"A": "1"}} and over == {"env": {"E": "1"}}


def test_variants_inherit_and_override(demo):
    a, b = demo["a"], demo["b"]
    assert a.args == {"MAX_JOBS": "8", "GPU_ARCH": "gfx942"}
    assert b.args == {"MAX_JOBS": "8", "GPU_ARCH": "gfx950"}  # one key overridden, the other inherited
    assert (a.base, b.base) == ("debian:12", "debian:13")
    assert (a.platforms, b.platforms) == (("linux/amd64",), ("linux/arm64",))  # a list replaces
    assert a.env == b.env == {"MODE": "plain"} and a.pip == b.pip == {"torch": "2.13.0"}
    assert (a.description, b.description) == ("a family for tests", "the other one")
    assert (a.tag_suffix, b.tag_suffix) == ("a", "bee")  # the variant's name unless it names one
    assert {v.family for v in demo.values()} == {"demo"}
    assert {v.spec_file for v in demo.values()} == {"images/demo.yaml"}


def test_defaults_when_the_spec_is_silent(write_spec, demo_text):
    text = demo_text.replace("platforms: [linux/amd64]\n", "")
    assert load_family(write_spec(text))["a"].platforms == ("linux/amd64",)


def test_a_variant_adds_a_pin_and_keeps_the_others(write_spec, demo_text):
    steps = "steps: [{pip: [torch, numpy]}, {source: lib}]"
    text = demo_text.replace("  a: {}", "  a: {pip: {numpy: 1.26.4}, %s}" % steps)
    assert load_family(write_spec(text))["a"].pip == {"torch": "2.13.0", "numpy": "1.26.4"}


@pytest.mark.parametrize(
    "variant, message",
    [
        ("{pip: {numpy: 1.26.4}}", "variants.a.pip.numpy: no step installs it"),
        (
            "{components: {more: {git: https://example.com/o/more.git, ref: %s}}}" % COMMIT,
            "variants.a.components.more: no step installs it",
        ),
        (
            "{patches: [{file: toolkit/__init__.py, tree: /x, component: lib}]}",
            "variants.a.patches[0]: no step applies it (a `source: lib` step with `into`)",
        ),
        (
            "{steps: [{pip: [torch, numpy]}, {source: lib}]}",
            "variants.a.steps[0].pip[1]: 'numpy' is not in the variant's `pip` table",
        ),
        (
            "{steps: [{pip: [torch], flags: [user]}, {source: lib}]}",
            "variants.a.steps[0].flags[0]: unknown pip flag 'user'",
        ),
        (
            "{steps: [{pip: [torch], env: {A: '${NOPE}'}}, {source: lib}]}",
            "variants.a.steps[0].env.A: ${NOPE} names no build arg of the variant",
        ),
        ("{steps: [{pip: [torch], source: lib}]}", "variants.a.steps[0]: a step has exactly one kind key"),
        ("{steps: [{run: ls}]}", "variants.a.steps[0]: a step has exactly one kind key (found none)"),
        ("{steps: [{pip: [torch]}, {source: lib, subdir: ../x}]}", "variants.a.steps[1].subdir: not a relative"),
        ("{steps: [{pip: [torch]}, {source: lib, extras: 'a;b'}]}", "variants.a.steps[1].extras: extras are"),
        ("{steps: [{pip: [torch]}, {source: lib, editable: true}]}", "variants.a.steps[1].editable: `editable` needs"),
        ("{steps: [{pip: [torch], after: x}, {source: lib}]}", "variants.a.steps[0].after: unknown key"),
    ],
)
def test_a_declared_entry_no_step_uses_and_a_bad_step_are_refused(write_spec, demo_text, variant, message):
    """Nothing declared is silently dropped: every pin, component and patch is consumed by a step, and every step
    names only what the variant declares."""
    problem = refusal(write_spec(demo_text.replace("  a: {}", f"  a: {variant}")))
    assert problem.startswith("images/demo.yaml: " + message), problem


def test_the_digest_tells_variants_apart_and_is_stable(demo, write_spec, demo_text):
    assert demo["a"].digest != demo["b"].digest
    assert load_family(write_spec(demo_text))["a"].digest == demo["a"].digest


def test_variants_are_independent_copies(demo):
    """merge deep-copies: one variant's mapping is never another's."""
    assert demo["a"].env is not demo["b"].env and demo["a"].components is not demo["b"].components


def test_a_file_outside_the_project_is_named_by_the_path_given(tmp_path, demo_text):
    path = tmp_path / "elsewhere" / "demo.yaml"
    path.parent.mkdir()
    path.write_text(demo_text)
    assert load_family(path)["a"].spec_file == str(path)


def refusal(path) -> str:
    with pytest.raises(SpecError) as e:
        load_family(path)
    text = str(e.value)
    assert "\n" not in text
    return text


EDIT_CASES = [
    (
        "family name differs from the file",
        ("family: demo", "family: other"),
        "family: must match the file name 'demo', got 'other'",
    ),
    (
        "family name",
        ("family: demo", "family: Demo"),
        "family: family names are lower-case letters, digits, '.', '_', '-': 'Demo'",
    ),
    ("default names no variant", ("default: a", "default: c"), "default: names no variant: 'c'"),
    ("alias", ("alias: dm", "alias: D M"), "alias: not a target name: 'D M'"),
    ("variant name", ("  b:\n", "  B:\n"), "variants.B: variant names are lower-case letters, digits, '.', '_', '-'"),
    (
        "template outside templates/",
        ("template: cpu.Dockerfile.j2", "template: ../build.py"),
        "template: not a relative normalised path inside the repository: '../build.py'",
    ),
    (
        "missing template",
        ("template: cpu.Dockerfile.j2", "template: none.j2"),
        "template: no such file in the repository: 'none.j2'",
    ),
    (
        "python as a shell fragment",
        ("python: /opt/venv/bin/python", "python: 'exit 0; :'"),
        "python: not an absolute normalised path: 'exit 0; :'",
    ),
    (
        "repository with a tag",
        ("repository: miles", "repository: miles:1"),
        "repository: not an image name (lower-case, no tag): 'miles:1'",
    ),
    (
        "variant pin",
        ("base: debian:13", "base: debian:latest"),
        "variants.b.base: unpinned base image 'debian:latest': 'latest' moves; name a fixed tag or a digest",
    ),
    (
        "gates without the bridge",
        ("imports: [sglang_attn_bridge]", "imports: [torch]"),
        "gates.imports: must import sglang_attn_bridge (every image installs the bridge)",
    ),
    (
        "a variant's gates drop pip check",
        ("  a: {}", "  a: {gates: {pip_check: null}}"),
        "variants.a.gates.pip_check: the variant declares packages: `pip check` must run over them "
        "(pip_check: {allow: []})",
    ),
    (
        "wheelhouse without platform",
        ("variants:", "wheelhouse: {python_version: '3.11'}\nvariants:"),
        "wheelhouse.platform: missing required key",
    ),
    (
        "patch names no git component",
        ("  a: {}", "  a: {patches: [{file: images/patches/rocm-megatron.patch, tree: /x, component: nope}]}"),
        "variants.a.patches[0].component: names no git component: 'nope'",
    ),
]


@pytest.mark.parametrize("edit,message", [c[1:] for c in EDIT_CASES], ids=[c[0] for c in EDIT_CASES])
def test_a_bad_family_is_one_line_naming_file_and_key(write_spec, demo_text, edit, message):
    old, new = edit
    assert old in demo_text
    assert refusal(write_spec(demo_text.replace(old, new, 1))) == f"images/demo.yaml: {message}"


@pytest.mark.parametrize("key", REQUIRED_FAMILY)
def test_each_required_key(write_spec, demo_text, key):
    if key == "variants":
        text = demo_text.split("variants:")[0]
    else:
        text = re.sub(rf"^{key}:.*\n", "", demo_text, flags=re.M)
    assert refusal(write_spec(text)) == f"images/demo.yaml: {key}: missing required key"


def test_a_variant_named_past_the_tag_limit_needs_a_tag_suffix(write_spec, demo_text):
    long = "v" * 116
    text = demo_text.replace("  a: {}", f"  a: {{}}\n  {long}: {{}}")
    assert refusal(write_spec(text)).startswith(f"images/demo.yaml: variants.{long}: not an image tag")
    assert load_family(write_spec(text.replace(f"{long}: {{}}", f"{long}: {{tag_suffix: short}}")))[long]


def test_invalid_yaml_names_the_line(write_spec, demo_text):
    text = demo_text.replace("alias: dm", "alias: dm: x")  # line 6
    assert refusal(write_spec(text)) == "images/demo.yaml: line 6: invalid YAML: mapping values are not allowed here"


def test_a_duplicate_key_is_refused_not_last_wins(write_spec, demo_text):
    text = demo_text.replace("base: debian:12\n", "base: debian:12\nbase: debian:11\n")
    assert refusal(write_spec(text)) == "images/demo.yaml: line 10: invalid YAML: duplicate key 'base'"


def test_an_alias_bomb_is_refused_before_it_expands(write_spec):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    assert (
        refusal(write_spec("\n".join(lines) + "\n"))
        == "images/demo.yaml: refusing the YAML: aliases expand to more than 100000 values"
    )


def test_unreadable_files(images_dir, write_spec):
    path = write_spec("")
    path.write_bytes(b"family: d\xe9mo\n")
    assert refusal(path) == "images/demo.yaml: not UTF-8 text"
    path.write_bytes(b"#" * (MAX_SPEC_BYTES + 1))
    assert refusal(path) == f"images/demo.yaml: larger than {MAX_SPEC_BYTES} bytes; refusing to parse it"
    assert refusal(images_dir / "none.yaml") == "images/none.yaml: cannot read: No such file or directory"


NON_STRING_KEYS = [
    ("int arg name", ("args: {", "args: {1: x, "), "args.1: a key must be a string, got int 1"),
    ("bool env name", ("env: {", "env: {true: x, "), "env.True: a key must be a string, got bool True"),
    ("float pip name", ("pip: {", "pip: {1.5: '1.0', "), "pip.1.5: a key must be a string, got float 1.5"),
    ("int variant name", ("  a: {}", "  a: {}\n  7: {}"), "variants.7: a key must be a string, got int 7"),
    (
        "null component name",
        ("components:", "components:\n  ~: {version: '1.0'}"),
        "components.None: a key must be a string, got NoneType None",
    ),
    ("int gate key", ("platform: cpu", "platform: cpu, 3: x"), "gates.3: a key must be a string, got int 3"),
]


@pytest.mark.parametrize("edit,message", [c[1:] for c in NON_STRING_KEYS], ids=[c[0] for c in NON_STRING_KEYS])
def test_a_key_that_is_not_a_string_is_a_spec_error(write_spec, demo_text, edit, message):
    """YAML reads `1:`, `true:`, `~:` as an int, a bool, None: a name must still be refused in one line."""
    old, new = edit
    assert old in demo_text
    assert refusal(write_spec(demo_text.replace(old, new, 1))) == f"images/demo.yaml: {message}"


def test_two_patch_files_may_not_share_a_name(write_spec, demo_text):
    """The context holds patches by file name (patches/NAME): a second file of the same name would replace the
    first, and both steps would apply it."""
    one, two = "toolkit/__init__.py", "bridge/src/sglang_attn_bridge/__init__.py"  # any repository files will do
    text = demo_text.replace("  a: {}", f"  a: {{patches: [{{file: {one}, tree: /a}}, {{file: {two}, tree: /b}}]}}")
    assert refusal(write_spec(text)) == (
        "images/demo.yaml: variants.a.patches[1].file: the same file name as "
        "'toolkit/__init__.py' (the build context holds patches by name)"
    )
    same = demo_text.replace("  a: {}", f"  a: {{patches: [{{file: {one}, tree: /a}}, {{file: {one}, tree: /b}}]}}")
    assert len(load_family(write_spec(same))["a"].patches) == 2  # one file applied to two trees is fine
