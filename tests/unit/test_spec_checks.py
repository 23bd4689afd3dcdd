"""The spec's value checks called directly: each class of bad value is one line `FILE: KEY: problem`, and the
values the real specs use pass."""

from __future__ import annotations

import pytest

from toolkit.errors import SpecError
from toolkit.spec.catalog import check_pins
from toolkit.spec.schema import check
from toolkit.spec.values import check_image_ref
from toolkit.spec.variant import FAMILY, VARIANT

F = "images/demo.yaml"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PATCH = "images/patches/rocm-megatron.patch"  # a file the repository has


def refusal(fn, *args) -> str:
    with pytest.raises(SpecError) as e:
        fn(*args)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{F}: ")
    return text


SCHEMA_CASES = [
    ("unknown key", {"bse": "x"}, VARIANT, "bse: unknown key"),
    ("unknown nested key", {"variants": {"a": {"bse": "x"}}}, FAMILY, "variants.a.bse: unknown key"),
    ("list for a mapping", {"args": ["A=1"]}, VARIANT, "args: expected a mapping, got list"),
    ("string for a list", {"platforms": "linux/amd64"}, VARIANT, "platforms: expected a list, got str"),
    ("int for a string", {"args": {"MAX_JOBS": 64}}, VARIANT, "args.MAX_JOBS: expected a string, got int 64"),
    ("float for a string", {"pip": {"torch": 2.1}}, VARIANT, "pip.torch: expected a string, got float 2.1"),
    ("bool for a string", {"base": True}, VARIANT, "base: expected a string, got bool True"),
    (
        "bool for an integer",
        {"patches": [{"strip": True}]},
        VARIANT,
        "patches[0].strip: expected an integer, got bool True",
    ),
    ("list for the gates", {"gates": ["imports"]}, VARIANT, "gates: expected a mapping, got list"),
    ("null variant", {"variants": {"a": None}}, FAMILY, "variants.a: expected a mapping, got NoneType"),
]


@pytest.mark.parametrize("data,schema,message", [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES])
def test_schema_refusals_name_the_key(data, schema, message):
    assert refusal(check, data, schema, F, "") == f"{F}: {message}"


def test_schema_accepts_well_typed_values_and_leaves_gates_to_their_own_schema():
    check(
        {
            "base": "debian:12",
            "args": {"A": "1"},
            "platforms": ["linux/amd64"],
            "gates": {"anything": [1]},
            "patches": [{"file": PATCH, "tree": "/x", "strip": 0}],
        },
        VARIANT,
        F,
        "",
    )


PIN_CASES = [
    (
        "latest base",
        {"base": "debian:latest"},
        "base: unpinned base image 'debian:latest': 'latest' moves; name a fixed tag or a digest",
    ),
    ("untagged base", {"base": "debian"}, "base: unpinned base image 'debian': name a tag or a digest"),
    (
        "a registry port is not a tag",
        {"base": "localhost:5000/debian"},
        "base: unpinned base image 'localhost:5000/debian': name a tag or a digest",
    ),
    (
        "upper-case base",
        {"base": "Debian:12"},
        "base: not an image reference (lower-case name[:tag][@digest]): 'Debian:12'",
    ),
    ("short digest", {"base": "debian@sha256:" + "a" * 32}, f"base: malformed digest in 'debian@sha256:{'a' * 32}'"),
    (
        "branch for a commit",
        {"components": {"lib": {"git": "https://h.example/lib.git", "ref": "main"}}},
        "components.lib.ref: git component must be pinned to a 40-hex commit, got 'main'",
    ),
    (
        "git without ref",
        {"components": {"lib": {"git": "https://h.example/lib.git"}}},
        "components.lib.ref: git component must be pinned to a 40-hex commit, got None",
    ),
    (
        "file url",
        {"components": {"lib": {"git": "file:///etc", "ref": COMMIT}}},
        "components.lib.git: not a git URL (scheme://host/path): 'file:///etc'",
    ),
    (
        "no git",
        {"components": {"lib": {"extras": "all"}}},
        "components.lib: a component needs `git` and `ref`",
    ),
    (
        "component name",
        {"components": {"my-lib": {"git": "https://h.example/org/lib.git", "ref": COMMIT}}},
        "components.my-lib: component names are identifiers",
    ),
    (
        "subdir leaves the tree",
        {"components": {"lib": {"git": "https://h.example/org/lib.git", "ref": COMMIT, "subdir": "../x"}}},
        "components.lib.subdir: not a relative normalised path inside the repository: '../x'",
    ),
    (
        "exclude with a specifier",
        {"components": {"lib": {"git": "https://h.example/org/lib.git", "ref": COMMIT, "exclude": ["x==1"]}}},
        "components.lib.exclude[0]: not a PEP 508 package name (with optional [extras]): 'x==1'",
    ),
    (
        "unpinned pip",
        {"pip": {"torch": "latest"}},
        "pip.torch: pip package must be pinned to an exact version, got 'latest'",
    ),
    (
        "pip range",
        {"pip": {"sglang": ">=0.5"}},
        "pip.sglang: pip package must be pinned to an exact version, got '>=0.5'",
    ),
    (
        "pip name with a specifier",
        {"pip": {"torch>=2": "2.0"}},
        "pip.torch>=2: not a PEP 508 package name (with optional [extras]): 'torch>=2'",
    ),
    ("platform", {"platforms": ["linux/amd64", "linux/s390x"]}, "platforms[1]: unknown platform 'linux/s390x'"),
    (
        "patch without tree",
        {"patches": [{"file": PATCH}]},
        "patches[0]: exactly one of `tree` (a path) or `package` (an import name)",
    ),
    (
        "patch with tree and package",
        {"patches": [{"file": PATCH, "tree": "/x", "package": "x"}]},
        "patches[0]: exactly one of `tree` (a path) or `package` (an import name)",
    ),
    (
        "patch package",
        {"patches": [{"file": PATCH, "package": "a.b"}]},
        "patches[0].package: a top-level import name, got 'a.b'",
    ),
    (
        "patch ref",
        {"patches": [{"file": PATCH, "tree": "/x", "ref": "main"}]},
        "patches[0].ref: must be a 40-hex commit, got 'main'",
    ),
    (
        "patch outside the repository",
        {"patches": [{"file": "../etc/passwd", "tree": "/x"}]},
        "patches[0].file: not a relative normalised path inside the repository: '../etc/passwd'",
    ),
    (
        "missing patch",
        {"patches": [{"file": "images/patches/none.patch", "tree": "/x"}]},
        "patches[0].file: no such file in the repository: 'images/patches/none.patch'",
    ),
    (
        "relative tree",
        {"patches": [{"file": PATCH, "tree": "opt/x"}]},
        "patches[0].tree: not an absolute normalised path: 'opt/x'",
    ),
    ("strip", {"patches": [{"file": PATCH, "tree": "/x", "strip": 10}]}, "patches[0].strip: must be 0..9, got 10"),
    (
        "arg name",
        {"args": {"A B": "1"}},
        "args.A B: names are identifiers (letters, digits, '_'; not starting with a digit)",
    ),
    # The value is repr'd, and the line escaped once more when it is cut to one line: the backslash doubles.
    ("env newline", {"env": {"FOO": "a\nRUN x"}}, "env.FOO: control character (newline, tab, ...) in 'a\\\\nRUN x'"),
    (
        "tag",
        {"tag_suffix": "-x"},
        "tag_suffix: not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 115 characters): '-x'",
    ),
]


@pytest.mark.parametrize("data,message", [c[1:] for c in PIN_CASES], ids=[c[0] for c in PIN_CASES])
def test_pin_refusals_name_the_key(data, message):
    assert refusal(check_pins, data, F, "") == f"{F}: {message}"


def test_pin_keys_carry_the_variant_prefix():
    assert refusal(check_pins, {"base": "debian"}, F, "variants.b.").startswith(f"{F}: variants.b.base: unpinned")


@pytest.mark.parametrize(
    "ref",
    [
        "debian:12",
        "ghcr.io:443/org/img:1.0",
        "debian@sha256:" + "0" * 64,
        "localhost:5000/debian:12@sha256:" + "f" * 64,
    ],
)
def test_pinned_references_pass(ref):
    check_image_ref(ref, F, "base")


def test_a_tag_suffix_leaves_room_for_the_hash():
    """`<suffix>-<hash12>` must fit the registry's 128 characters."""
    check_pins({"tag_suffix": "t" * 115}, F, "")
    assert "at most 115 characters" in refusal(check_pins, {"tag_suffix": "t" * 116}, F, "")


def test_a_real_pin_set_passes():
    check_pins(
        {
            "base": "debian:12",
            "platforms": ["linux/amd64", "linux/arm64"],
            "components": {
                "lib": {
                    "git": "https://h.example/org/lib.git",
                    "ref": COMMIT,
                    "subdir": "a/b",
                    "extras": "all,dev",
                    "exclude": ["nvidia-resiliency-ext"],
                },
            },
            "pip": {"torch": "2.13.0", "flash-attn[x]": "2.8.3", "sglang": "0.5.10"},
            "patches": [{"file": PATCH, "tree": "/root/Megatron-LM", "ref": COMMIT, "strip": 0}],
            "args": {"MAX_JOBS": "8"},
            "env": {"A_1": "x y $z"},
            "tag_suffix": "v1.0_rc",
        },
        F,
        "",
    )
