"""A compiling step's parallelism comes from the worker that runs it (image_tools/jobs.py), never from a constant
in the Dockerfile: the computation, the wrapper, and what the GPU renders hold."""

from __future__ import annotations

import importlib.util
import re

import pytest

from toolkit.errors import SpecError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import ROOT, load_catalog
from toolkit.steps import applies

_spec = importlib.util.spec_from_file_location("image_jobs", ROOT / "image_tools" / "jobs.py")
assert _spec and _spec.loader
jobs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jobs)

GIB = 1024**3
CATALOG = load_catalog()
GPU_VARIANTS = sorted(n for n, v in CATALOG.variants.items() if v.family in ("cuda", "rocm"))


# ---- the computation ----


def test_memory_bounds_the_jobs_when_it_is_the_scarcer():
    # 64 CPUs at 2 a job would allow 32; 60 GiB at 9 GiB a job allows 6 (flash-attn's own estimate)
    assert jobs.choose(64, 60 * GIB, 9, 2)[:2] == (6, None)


def test_cpus_bound_the_jobs_when_they_are_the_scarcer():
    assert jobs.choose(8, 512 * GIB, 9, 2)[:2] == (4, None)


def test_never_less_than_one_job():
    assert jobs.choose(1, 2 * GIB, 9, 4)[:2] == (1, None)


def test_unknown_memory_leaves_the_cpu_bound():
    assert jobs.choose(16, None, 9, 2)[:2] == (8, None)


def test_parallel_extensions_share_the_budget():
    # apex: 64 CPUs at 4 a job -> 16, 256 GiB at 4 GiB -> 64: a budget of 16, 8 extensions of 2 jobs
    assert jobs.choose(64, 256 * GIB, 4, 4, parallel_max=8)[:2] == (2, 8)
    # a small worker: a budget of 3, three extensions of one job, never 8 x 64
    assert jobs.choose(12, 100 * GIB, 4, 4, parallel_max=8)[:2] == (1, 3)


def test_a_given_max_jobs_is_the_budget():
    assert jobs.choose(2, 1 * GIB, 9, 2, given=64)[:2] == (64, None)
    assert jobs.choose(2, 1 * GIB, 4, 4, parallel_max=8, given=64)[:2] == (8, 8)
    assert "MAX_JOBS=64 given" in jobs.choose(2, 1 * GIB, 9, 2, given=64)[2]


@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("8", 8), ("128", 128)])
def test_the_build_arg_is_empty_or_a_count(value, expected):
    assert jobs.given_jobs(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "auto", "8 ", "1e3"])
def test_a_build_arg_that_is_not_a_count_is_refused(value):
    with pytest.raises(ValueError, match="MAX_JOBS"):
        jobs.given_jobs(value)


def test_meminfo_available_is_read_in_bytes():
    text = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   65536000 kB\n"
    assert jobs.meminfo_available(text) == 65536000 * 1024
    assert jobs.meminfo_available("MemFree: 2048 kB\n") == 2048 * 1024  # an old kernel without MemAvailable
    assert jobs.meminfo_available("") is None


def test_the_wrapper_runs_the_command_with_the_jobs_in_its_environment(monkeypatch):
    ran = {}
    monkeypatch.setattr(jobs, "cpu_count", lambda: 32)
    monkeypatch.setattr(jobs, "available_bytes", lambda: 40 * GIB)
    monkeypatch.setattr(jobs.os, "execvpe", lambda f, argv, env: ran.update(argv=argv, env=env))
    monkeypatch.setenv("MAX_JOBS", "")
    argv = ["--gib-per-job", "4", "--cpus-per-job", "4", "--parallel-env", "APEX_PARALLEL_BUILD"]
    jobs.main([*argv, "--parallel-max", "8", "--", "pip", "install", "x"])
    assert ran["argv"] == ["pip", "install", "x"]
    assert (ran["env"]["MAX_JOBS"], ran["env"]["APEX_PARALLEL_BUILD"]) == ("1", "8")
    monkeypatch.setenv("MAX_JOBS", "3")  # `--set args.MAX_JOBS=3` wins over the machine
    jobs.main(["--gib-per-job", "9", "--", "pip"])
    assert ran["env"]["MAX_JOBS"] == "3"


def test_the_wrapper_refuses_a_max_jobs_that_is_not_a_count(monkeypatch, capsys):
    monkeypatch.setenv("MAX_JOBS", "lots")
    monkeypatch.setattr(jobs.os, "execvpe", lambda *a: pytest.fail("ran"))
    assert jobs.main(["--gib-per-job", "9", "--", "pip"]) == 2
    assert "MAX_JOBS" in capsys.readouterr().err


# ---- the spec and the render ----


def compiling_steps(name):
    v = CATALOG.resolve(name)
    return [s for s in v.steps if applies(s, v.args) and "compile" in s]


# What compiles a CUDA or HIP kernel in each GPU family (the steps FORCE_BUILD and no-build-isolation are about).
KERNEL_STEPS = {
    "cuda": {
        "flash-attn",
        "flash_attention",
        "fast_hadamard_transform",
        "causal-conv1d",
        "transformer-engine[pytorch]",
        "apex",
        "miles",
    },
    "rocm": {"transformer_engine", "flash-attn"},
}


@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_every_kernel_build_records_its_memory_per_job_and_where_the_figure_comes_from(name):
    found = set()
    for step in compiling_steps(name):
        found.add(step["value"][0] if step["kind"] == "pip" else step["value"])
        assert step["compile"]["gib_per_job"] >= 1 and step["compile"]["record"].strip(), step["value"]
    assert found == KERNEL_STEPS[CATALOG.resolve(name).family]


@pytest.mark.parametrize("name", GPU_VARIANTS)
def test_no_constant_job_count_reaches_the_dockerfile(name, monkeypatch):
    text = render(make_plan(CATALOG.resolve(name), revision="r"))
    assert 'ARG MAX_JOBS=""' in text
    assert not re.search(r"MAX_JOBS=[\"']?[0-9]", text) and "APEX_PARALLEL_BUILD=" not in text
    assert "ENV MAX_JOBS" not in text and 'MAX_JOBS="${MAX_JOBS}"' not in text  # never in the image's config
    runs = [r for r in text.split("\nRUN ") if "/tmp/tools/jobs.py" in r]
    assert len(runs) == len(compiling_steps(name))
    for r in runs:
        assert r.startswith("--mount=type=bind,source=tools,target=/tmp/tools ")
    # the host plays no part: the same text whatever this machine has
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    assert render(make_plan(CATALOG.resolve(name), revision="r")) == text


def test_apex_shares_its_budget_between_its_extensions():
    text = render(make_plan(CATALOG.resolve("cu13-x86"), revision="r"))
    (apex,) = [r for r in text.split("\nRUN ") if "/tmp/src/apex" in r]
    assert "jobs.py --gib-per-job 4 --cpus-per-job 4 --parallel-env APEX_PARALLEL_BUILD --parallel-max 8 -- pip" in apex


def test_a_set_max_jobs_reaches_the_steps_as_their_budget():
    text = render(make_plan(CATALOG.resolve("cu13-x86"), sets=["args.MAX_JOBS=12"], revision="r"))
    assert 'ARG MAX_JOBS="12"' in text  # ARGs are every RUN's environment: jobs.py takes it as the budget


@pytest.mark.parametrize("value", ["auto", "0", "-2", "8;rm"])
def test_a_set_max_jobs_that_is_not_a_count_is_refused(value):
    with pytest.raises(SpecError, match="MAX_JOBS"):
        make_plan(CATALOG.resolve("rocm"), sets=[f"args.MAX_JOBS={value}"], revision="r")


COMPILE = "compile: {gib_per_job: 9, record: flash-attn's setup.py}"


@pytest.mark.parametrize(
    "step, message",
    [
        ("{pip: [torch], compile: {gib_per_job: 9}}", "compile.record"),
        ("{pip: [torch], compile: {record: x}}", "compile.gib_per_job"),
        ("{pip: [torch], compile: {gib_per_job: 0, record: x}}", "compile.gib_per_job"),
        ("{pip: [torch], env: {MAX_JOBS: '64'}, " + COMPILE + "}", "env.MAX_JOBS"),
        (
            "{source: lib, env: {P: '8'}, compile: {gib_per_job: 4, parallel: {env: P, max: 8}, record: x}}",
            "env.P",
        ),
        ("{source: lib, compile: {gib_per_job: 4, parallel: {env: MAX_JOBS, max: 8}, record: x}}", "parallel.env"),
    ],
)
def test_a_compile_record_that_cannot_size_the_jobs_is_refused(demo_text, write_spec, step, message):
    from toolkit.spec.catalog import load_family

    text = demo_text.replace(
        "steps: [{pip: [torch]}, {source: lib}, patches]", f"steps: [{step}, {{source: lib}}, patches]"
    )
    if "source: lib," in step:
        text = text.replace("steps: [", "steps: [{pip: [torch]}, ").replace(", {source: lib}, patches]", ", patches]")
    path = write_spec(text)
    with pytest.raises(SpecError, match=re.escape(message)):
        load_family(path)
