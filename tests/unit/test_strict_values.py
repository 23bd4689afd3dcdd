"""One reading of booleans and whole numbers (toolkit/strict.py) and the gate runner's copy of the boolean rule
(verify/env_flag.py); single-valued options given twice; gate timeouts a wait can take; lock records of the shape
`lock` writes. In-process, no engine."""

from __future__ import annotations

import argparse
import copy
import json
import math

import pytest

import build
from toolkit import strict
from toolkit.cli import parse
from toolkit.errors import SpecError, UsageError
from toolkit.gates import verify_image
from toolkit.lock import file as lock_file
from toolkit.spec.catalog import IMAGES_DIR, load_catalog
from verify import env_flag

# Text a boolean or a number may be given as, the odd ones first: what Python's own readers accept and we do not.
ODD = [
    "",
    " 1",
    "1 ",
    "1\n",
    "+1",
    "-1",
    "1_0",
    "١٢",  # Arabic-Indic digits: int() reads 12
    "²",  # a superscript: isdigit() is true, int() raises
    "１",  # a full-width digit
    "ｔｒｕｅ",
    "TRUE",
    "True",
    "yes",
    "Yes",
    "no",
    "on",
    "off",
    "y",
    "t",
    "2",
    "01",
    "1e3",
    "1.0",
    "0x10",
    "9" * 5000,
    "nan",
    "inf",
    "\u0130",  # İ: lower() makes it two characters
    "K",  # the Kelvin sign lowers to k
]


@pytest.mark.parametrize("text", ODD + list(strict.TRUE_WORDS + strict.FALSE_WORDS))
def test_the_runner_reads_a_boolean_as_the_toolkit_does(text):
    assert env_flag.boolean(text) == strict.boolean(text)
    assert env_flag.TRUE_WORDS == strict.TRUE_WORDS and env_flag.FALSE_WORDS == strict.FALSE_WORDS
    assert env_flag.REQUIRE_GPU == verify_image.REQUIRE_GPU


def test_booleans_are_the_six_words_in_any_ascii_case_and_nothing_else():
    for word in ("1", "true", "TRUE", "True", "yes", "YES"):
        assert strict.boolean(word) is True
    for word in ("0", "false", "FALSE", "no", "No"):
        assert strict.boolean(word) is False
    for word in (" 1", "1 ", "on", "y", "2", "ｔｒｕｅ", "\u0130", "", "１"):
        assert strict.boolean(word) is None, word


def test_whole_numbers_are_ascii_digits_within_their_bounds():
    assert strict.whole("12", 1, 100) == 12 and strict.whole("007", 1, 100) == 7
    for text in ("١٢", "²", "１", "1_0", " 12", "12 ", "+12", "-1", "1e3", "1.0", "0", "101", "9" * 5000, ""):
        assert strict.whole(text, 1, 100) is None, text


@pytest.mark.parametrize("text", ["١٢", "²", "1_0", " 12", "+12", "0", "86401", "9" * 5000, "1e3", "nan"])
def test_an_odd_engine_timeout_is_refused_naming_the_variable(monkeypatch, text):
    from toolkit.engine.calls import engine_timeout
    from toolkit.plan.source_archive import member_caps

    monkeypatch.setenv("MILES_ENGINE_TIMEOUT", text)
    with pytest.raises(UsageError, match="^MILES_ENGINE_TIMEOUT="):
        engine_timeout()
    monkeypatch.delenv("MILES_ENGINE_TIMEOUT")
    for name in ("MILES_SOURCE_MAX_FILES", "MILES_SOURCE_MAX_BYTES"):
        monkeypatch.setenv(name, text if text != "86401" else "9" * 19)
        with pytest.raises(UsageError, match=f"^{name}="):
            member_caps()
        monkeypatch.delenv(name)


def test_the_gpu_requirement_is_read_strictly(monkeypatch):
    for text, want in (("1", True), ("true", True), ("Yes", True), ("0", False), ("no", False), ("", False)):
        monkeypatch.setenv("MILES_GATES_REQUIRE_GPU", text)
        assert verify_image.gpu_required() is want and env_flag.gpu_required() is want
    for text in (" 1", "on", "2", "ｙｅｓ"):
        monkeypatch.setenv("MILES_GATES_REQUIRE_GPU", text)
        with pytest.raises(UsageError, match="^MILES_GATES_REQUIRE_GPU="):
            verify_image.gpu_required()
        with pytest.raises(env_flag.BadEnvironment, match="^MILES_GATES_REQUIRE_GPU="):
            env_flag.gpu_required()


class _Created(Exception):
    pass


class _Images:
    def get(self, ref):
        return object()


class _Containers:
    def __init__(self):
        self.kwargs: dict = {}

    def create(self, image, **kwargs):
        self.kwargs = kwargs
        raise _Created


class _Client:
    def __init__(self):
        self.images, self.containers = _Images(), _Containers()


@pytest.mark.parametrize("text, passed", [("true", "1"), ("YES", "1"), ("1", "1"), ("no", "0"), (None, "0")])
def test_verify_passes_the_gpu_requirement_into_the_gate_container(monkeypatch, text, passed):
    if text is None:
        monkeypatch.delenv("MILES_GATES_REQUIRE_GPU", raising=False)
    else:
        monkeypatch.setenv("MILES_GATES_REQUIRE_GPU", text)
    client = _Client()
    with pytest.raises(_Created):
        verify_image.verify_image(client, load_catalog().resolve("cuda"), "miles:cu13-x86")
    assert client.containers.kwargs["environment"] == {"MILES_GATES_REQUIRE_GPU": passed}


def test_a_build_with_the_gpu_required_is_refused_where_gpu_gates_can_only_fail(monkeypatch):
    monkeypatch.setenv("MILES_GATES_REQUIRE_GPU", "true")
    with pytest.raises(UsageError, match="^MILES_GATES_REQUIRE_GPU is true"):
        verify_image.check_build_gates(load_catalog().resolve("cuda"))
    verify_image.check_build_gates(load_catalog().resolve("smoke"))  # no GPU gate: nothing to refuse


@pytest.mark.parametrize(
    "argv, option",
    [
        (["build", "--target", "smoke", "--target", "miles-cpu"], "--target"),
        (["build", "--target", "smoke", "--tag", "a:1", "--tag=b:1"], "--tag"),
        (["build", "--tar", "smoke", "--target", "cuda"], "--target"),  # an abbreviation is the same option
        (["build", "--target", "smoke", "--registry", "a", "--registry", "a"], "--registry"),
        (["verify", "--target", "smoke", "--image", "a", "--image", "b"], "--image"),
        (["render", "--target", "smoke", "-o", "x", "--output", "y"], "-o/--output"),
        (["bake", "--target", "smoke", "-o", "x", "-o", "y"], "-o/--output"),
        (["lock", "--from-release-lock", "a", "--from-release-lock", "b"], "--from-release-lock"),
        (["build", "--target", "smoke", "--progress", "plain", "--progress", "auto"], "--progress"),
    ],
)
def test_a_single_valued_option_given_twice_is_one_line_exit_2(capsys, argv, option):
    assert parse(build.parser(), argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"error: {option}: given twice" in err, err


def test_options_that_take_many_values_still_do(capsys):
    args = parse(build.parser(), ["bake", "--target", "smoke", "--target", "miles-cpu"])
    assert isinstance(args, argparse.Namespace) and args.target == ["smoke", "miles-cpu"]
    args = parse(build.parser(), ["build", "--target", "smoke", "--set", "a=1", "--set", "b=2"])
    assert isinstance(args, argparse.Namespace) and args.set == ["a=1", "b=2"]


def test_argparse_errors_are_one_line(capsys):
    for argv in (["render"], ["frobnicate"], ["build", "--target"], ["render", "--target", "smoke", "--nope"]):
        assert parse(build.parser(), argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("timeout", [2.2e6, 86400.5, math.inf, -math.inf, math.nan, 0, -1, True, "60", 1e400])
def test_a_gate_timeout_a_wait_cannot_take_is_refused_at_load(timeout):
    from verify.config import ConfigError, from_dict

    gates = {"commands": [{"name": "x", "argv": ["{python}", "probes/bridge_attention.py"], "timeout": timeout}]}
    with pytest.raises(ConfigError, match=r"commands\[0\]\.timeout"):
        from_dict(gates, "spec")


def test_a_gate_timeout_of_a_day_or_less_loads():
    from verify.config import from_dict

    for timeout in (0.5, 600, 86400):
        gates = {"commands": [{"name": "x", "argv": ["{python}", "probes/bridge_attention.py"], "timeout": timeout}]}
        assert from_dict(gates, "spec")["commands"][0].timeout == timeout


def _cuda_lock() -> dict:
    return json.loads((IMAGES_DIR / "cuda.lock.json").read_text())


def _first(section: dict) -> tuple:
    key = sorted(section)[0]
    return key, section[key]


@pytest.mark.parametrize(
    "record",
    [
        {"pending": "its index could not be reached", "sha256": "0" * 64},
        {"pending": "its index could not be reached", "sha256": ["a"]},
        {"pending": "x", "file": "x.whl", "kind": "wheel"},
        {"pending": ""},
        {"pending": 1},
        {"pending": None, "sha256": "0" * 64},
    ],
)
def test_a_pending_pip_record_is_the_reason_alone(record):
    lock = _cuda_lock()
    pin, places = _first(lock["pip"])
    place = sorted(places)[0]
    places[place] = record
    with pytest.raises(SpecError, match=f"pip.{pin}.{place}"):
        lock_file.check(lock, "images/cuda.lock.json", "cuda")


def test_a_pending_pip_record_as_lock_writes_it_loads():
    lock = _cuda_lock()
    _, places = _first(lock["pip"])
    places[sorted(places)[0]] = {"pending": "its index could not be reached"}
    lock_file.check(lock, "images/cuda.lock.json", "cuda")


def _closure_package(lock: dict) -> dict:
    variant, places = _first(lock["closure"])
    _, rec = _first(places)
    return rec["packages"][sorted(rec["packages"])[0]]


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda pkg: pkg.__setitem__("files", ["x.whl"]), ".files"),
        (lambda pkg: pkg.__setitem__("via", "spec"), ".via"),
        (lambda pkg: pkg.__setitem__("via", [1]), ".via"),
        (lambda pkg: pkg.__setitem__("via", None), ".via"),
    ],
)
def test_a_closure_record_of_another_shape_is_refused_naming_the_key(edit, key):
    lock = _cuda_lock()
    edit(_closure_package(lock))
    with pytest.raises(SpecError, match=key.replace(".", r"\.")):
        lock_file.check(lock, "images/cuda.lock.json", "cuda")


@pytest.mark.parametrize("policy", [{"commit": 1}, {"branch": ["main"]}, {"tag": ""}, {"branch": None}])
def test_a_source_policy_of_another_shape_is_refused(policy):
    lock = _cuda_lock()
    name, entry = _first(lock["sources"])
    entry["policy"] = policy
    with pytest.raises(SpecError, match=f"sources.{name}.policy"):
        lock_file.check(lock, "images/cuda.lock.json", "cuda")


def test_a_lock_artifact_is_never_pending():
    lock = json.loads((IMAGES_DIR / "rocm.lock.json").read_text())
    name, entry = _first(lock["artifacts"])
    target = entry if "assets" not in entry else _first(entry["assets"])[1]
    target["pending"] = True
    before = copy.deepcopy(lock)
    with pytest.raises(SpecError, match="pending"):
        lock_file.check(lock, "images/rocm.lock.json", "rocm")
    assert before != _cuda_lock()


@pytest.mark.parametrize("jobs", ["²", "١٢", "１", "0", "4097", " 8", "8_0", "9" * 5000])
def test_a_job_budget_is_ascii_digits_in_the_toolkit_and_in_the_image(jobs):
    from image_tools.jobs import given_jobs
    from toolkit.plan.build_plan import make_plan

    with pytest.raises(UsageError, match="MAX_JOBS"):
        make_plan(load_catalog().resolve("cuda"), sets=[f"args.MAX_JOBS={jobs}"], revision="x")
    with pytest.raises(ValueError, match="MAX_JOBS"):
        given_jobs(jobs)
    assert given_jobs("8") == 8 and given_jobs("") is None
