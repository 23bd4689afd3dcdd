"""Hypothesis over build.py's subcommands, options, environment variables and `--set` spec fields: whatever it is
given (text that is not UTF-8, huge and odd numbers, links to themselves, FIFOs, folders where files go), `main`
returns 0 to 3 with at most one line on stderr and never raises. In-process (build.main(argv)), with no engine
answering, so a command that would reach one stops at exit 3; from a scratch folder, so a relative output path
lands there. Bounded: a fixed number of examples, no deadline (a render takes a second on a loaded machine)."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ROOT

import build
from toolkit.errors import ToolkitError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # a name of bytes that are not UTF-8, as Python holds it (surrogateescape)
ENV = ["MILES_ENGINE_TIMEOUT", "MILES_SOURCE_MAX_FILES", "MILES_SOURCE_MAX_BYTES", "MILES_GATES_REQUIRE_GPU"]
TARGETS = ["smoke", "miles-cpu", "cuda", "rocm", "cu13", "nope", "", "../x", "smoke\n", "x" * 300]
SET_KEYS = ["args.MAX_JOBS", "args.GPU_ARCH", "base", "platforms", "tag_suffix", "python", "pip.torch", "nope"]

# Plain text without NUL (no argv or environment holds one) or lone surrogates other than surrogateescape's.
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
odd_numbers = st.sampled_from(
    ["١٢", "²", "１", "1_0", " 12", "+12", "-1", "0", "9" * 5000, "1e400", ".inf", ".nan", "NaN", "1" * 19, "86401"]
)
words = st.sampled_from(["1", "0", "true", "FALSE", "yes", "No", "on", " 1", "ｔｒｕｅ", "", "2", NOT_UTF8])
values = st.one_of(text, odd_numbers, words, st.integers(-(10**30), 10**30).map(str), st.just(NOT_UTF8 + "x"))


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory):
    """Paths of every awkward kind: a FIFO, a link to itself, a folder, a missing folder, a name that is not UTF-8,
    a folder holding a FIFO, /dev/null."""
    root = tmp_path_factory.mktemp("odd")
    os.mkfifo(root / "fifo")
    (root / "loop").symlink_to(root / "loop")
    (root / "folder").mkdir()
    (root / "with-fifo").mkdir()
    os.mkfifo(root / "with-fifo" / "x.patch")
    (root / "file.json").write_text("{")
    (root / "big.json").write_text("[" * 100_000)
    (root / NOT_UTF8).write_text("x")
    return [
        str(root / name)
        for name in ("fifo", "loop", "folder", "missing/x", "with-fifo", "file.json", "big.json", NOT_UTF8)
    ] + ["/dev/null", NOT_UTF8 + ".out", "out.txt"]


def argv_for(draw, paths) -> list:
    path = st.sampled_from(paths)
    target = draw(st.one_of(st.sampled_from(TARGETS), text))
    command = draw(st.sampled_from(["build", "render", "verify", "bake", "lint", "lock", "list", "none"]))
    if command == "none":
        return draw(st.lists(st.one_of(text, st.sampled_from(["--target", "-o", "--help"])), max_size=3))
    if command == "list":
        return ["list"]
    if command == "lint":  # only what is refused before the slow hadolint pass over every target
        refused = [p for p in paths if p.endswith(("fifo", "loop", "missing/x", "/dev/null", ".out"))]
        return ["lint", *draw(st.lists(st.sampled_from(refused), min_size=1, max_size=2))]
    if command == "lock":  # a family no spec has: refused before any remote is asked
        return ["lock", "--from-release-lock", draw(path), "--family", draw(st.sampled_from(["nope", "", "../x"]))]
    argv = [command, "--target", target]
    options = {
        "build": {
            "--tag": values,
            "--registry": values,
            "--set": st.builds(lambda k, v: f"{k}={v}", st.sampled_from(SET_KEYS), values),
            "--source": st.builds(lambda k, p: f"{k}={p}", st.sampled_from(["miles", "wheels", "nope"]), path),
            "--secret": st.builds(lambda p: f"id=x,src={p}", path),
            "--image-tag": st.sampled_from(["dev", "custom", "bad"]),
            "--custom-tag": values,
            "--progress": st.sampled_from(["plain", "auto", "x"]),
        },
        "render": {"--set": st.builds(lambda k, v: f"{k}={v}", st.sampled_from(SET_KEYS), values), "-o": path},
        "verify": {
            "--image": values,
            "--platform": st.one_of(values, st.sampled_from(["linux/amd64", "linux/../x"])),
            "--json": path,
            "--junit": path,
            "--export-cst": path,
            "--base": st.just(None),
        },
        "bake": {"-o": path, "--registry": values, "--source": st.builds(lambda p: f"miles={p}", path)},
    }[command]
    for option in draw(st.lists(st.sampled_from(sorted(options)), max_size=3)):
        value = draw(options[option])
        argv += [option] if value is None else [option, value]
    return argv


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_input_makes_build_py_raise_or_say_more_than_one_line(data, odd_files, tmp_path, monkeypatch, capsys):
    argv = argv_for(data.draw, odd_files)
    env = data.draw(st.dictionaries(st.sampled_from(ENV), st.one_of(odd_numbers, words, text), max_size=2))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = build.main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2, 3), (argv, env, code, err)
    assert len(err.strip().splitlines()) <= 1 and "Traceback" not in err, (argv, env, err)


SPEC_FIELDS = [
    ("gates", "commands", 0, "timeout"),
    ("args", "MAX_JOBS"),
    ("args", "NEW"),
    ("variants", "smoke", "tag_suffix"),
    ("variants", "smoke", "platforms"),
    ("python",),
    ("base",),
    ("gates", "imports"),
]
spec_values = st.one_of(
    st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e308, 2.2e6, 10**30, -1, 0, True, None, [], {}]),
    st.integers(-(10**40), 10**40),
    st.floats(),
    values,
    st.lists(values, max_size=2),
)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(SPEC_FIELDS), value=spec_values, raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_no_spec_value_makes_loading_or_rendering_raise(images_dir, field, value, raw):
    """A spec field given anything YAML holds (or the file's bytes not UTF-8) loads, plans and renders, or is one
    ToolkitError (build.py's exit 2): never another exception."""
    for name in ("smoke.constraints.txt", "smoke.constraints.arm64.txt"):
        shutil.copyfile(ROOT / "images" / name, images_dir / name)
    data = yaml.safe_load((ROOT / "images" / "smoke.yaml").read_text())
    node = data
    for key in field[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[field[-1]] = value
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=False).encode()
    (images_dir / "smoke.yaml").write_bytes(text if raw is None else text + b"\n# " + raw.replace(b"\n", b" "))
    try:
        variant = load_catalog(images_dir).resolve("smoke")
        render(make_plan(variant, revision="fuzz"))
    except ToolkitError:
        pass
