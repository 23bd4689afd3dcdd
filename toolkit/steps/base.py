"""What every step kind shares: the base class, where a step sits, `${ARG}` references and the lookups of
the variant's tables that several kinds make."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from toolkit.errors import SpecError, short
from toolkit.plan import artifacts as art
from toolkit.spec.values import CONTROL_RE, IDENT_RE
from toolkit.strict import whole

ARG_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# An extra package index a pip step declares (a vendor's wheel index): https, a host name, plain path segments.
INDEX_URL_RE = re.compile(r"https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~+-]+)*/?")
# A requirement text a manifest rewrite matches or writes: PEP 508 characters, no quotes, no shell syntax.
REQ_TEXT_RE = re.compile(r"[A-Za-z0-9._\[\]<>=!~, -]+")
MANIFEST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.toml")
GLOB_RE = re.compile(r"[A-Za-z0-9._/*+-]+")
PIP_FLAGS = ("no-deps", "no-build-isolation", "force-reinstall")
# A step that compiles native code (a CUDA or HIP extension): `compile:` records one compiler job's peak memory
# and the CPUs it keeps busy, with where each figure comes from; image_tools/jobs.py sizes the step's jobs to the
# worker that runs it. `parallel`: a variable the build reads as how many extensions it builds at once (apex's
# APEX_PARALLEL_BUILD), at most `max`, sharing the same budget.
COMPILE = {"gib_per_job": int, "cpus_per_job": int, "parallel": {"env": str, "max": int}, "record": str}
MAX_JOBS_GIVEN = 4096  # the largest job budget `--set args.MAX_JOBS=N` may give (image_tools/jobs.py: the same)
JOBS_ARG = "MAX_JOBS"  # the build arg that, when set, is every compiling step's job budget instead
TOOLS_MOUNT = "--mount=type=bind,source=tools,target=/tmp/tools"


def expand(text: str, args: dict) -> str:
    """`text` with each `${NAME}` replaced by the arg's value: what a validator checks (the image sees the same)."""
    return ARG_REF_RE.sub(lambda m: str(args.get(m.group(1), "")), text)


@dataclass(frozen=True)
class Where:
    """Where a step sits, for error lines: the file and the dotted key of the step."""

    file: str
    key: str

    def error(self, sub: str, problem: str) -> SpecError:
        return SpecError(self.file, f"{self.key}.{sub}" if sub else self.key, problem)


def check_refs(value: str, args: dict, where: Where, sub: str) -> None:
    for name in ARG_REF_RE.findall(value):
        if name not in args:
            raise where.error(sub, f"${{{name}}} names no build arg of the variant (args: {', '.join(sorted(args))})")
    rest = ARG_REF_RE.sub("", value)
    if "${" in rest or CONTROL_RE.search(value):
        raise where.error(sub, f"not a plain value or `${{ARG}}` reference: {short(value)}")


class Kind:
    """One step kind. `key` is its YAML key, `main` the schema of that key's value (None: the kind takes no value and
    is written as a bare name), `options` the schema of its other keys."""

    key: ClassVar[str]
    order: ClassVar[int]  # its place in KINDS and in docs/step-kinds.md
    main: ClassVar[Any] = None
    options: ClassVar[dict] = {}

    def check(self, step: dict, v: dict, where: Where) -> None:
        """Refuse what this kind cannot render safely or what names nothing in the variant."""

    def uses(self, step: dict, v: dict) -> set[tuple[str, str]]:
        """The table entries (`pip`, `components`) this step consumes: an entry no step consumes is refused."""
        return set()

    def view(self, step: dict, v: dict) -> dict:
        """What `lines` receives: the step's own values plus what it resolves from the variant's tables."""
        return dict(step)

    def lines(self, step: dict, out: Out) -> list[str]:
        """The Dockerfile instructions this step emits (a RUN with its continuation lines is one), every spec value
        quoted by `out`; templates/partials/steps_list.j2 only places them."""
        raise NotImplementedError(self.key)


@dataclass(frozen=True)
class Out:
    """What a step's Dockerfile text depends on beyond the step: the variant's build args (a `${NAME}` word), its
    python, and the build's mounts. A step that reaches a package index mounts the host's CA bundle as a BuildKit
    secret (absent secret = empty mount), so the bundle is used by the step and never lands in a layer; on a
    wheelhouse family it mounts the wheelhouse instead and pip runs offline."""

    args: dict
    python: str
    pip_secret: str
    wheelhouse_image: str | None
    src: dict
    artifact_dir: str
    wheels_context: str
    wheels_dir: str

    def word(self, value) -> str:
        from toolkit.render.quoting import shell_word

        return shell_word(value, self.args)

    def dfword(self, value) -> str:
        from toolkit.render.quoting import dockerfile_word

        return dockerfile_word(value, self.args)

    def index_mount(self) -> str:
        if self.wheelhouse_image:
            return f"--mount=type=bind,from={self.wheelhouse_image},target=/tmp/wheelhouse"
        return f"--mount=type=secret,id={self.pip_secret}"

    def index_env(self) -> str:
        if self.wheelhouse_image:
            return ""
        s = f"/run/secrets/{self.pip_secret}"
        return f"if [ -s {s} ]; then export PIP_CERT={s} GIT_SSL_CAINFO={s}; fi;"

    def pip_opts(self) -> str:
        if self.wheelhouse_image:
            return "--no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt"
        return "--no-cache-dir"

    def source_mount(self, name: str, target: str) -> str:
        """A git component is the named build context src[name], mounted for one step (writes discarded)."""
        return f"--mount=type=bind,from={self.src[name]},target={target},rw"

    def artifact_mount(self, name: str) -> str:
        """A checksum-pinned artifact's fetch stage (partials/header.j2), mounted read-only for one step."""
        return f"--mount=type=bind,from={art.stage_name(name)},target={self.artifact_dir}/{name}"


def run(first: str, lines) -> str:
    """One RUN instruction: `first` on the RUN line (mounts), then each non-empty line as a continuation."""
    return "RUN " + first + "".join(f" \\\n    {line}" for line in lines if line)


def no_deps_over_closure(view: dict, v: dict) -> dict:
    """A step of a variant whose lock holds its closure installs with `--no-deps`: the closure step installed what
    it would bring, so no step resolves anything on its own."""
    flags = view.get("flags", [])
    if v.get("closure") and not v.get("wheelhouse") and "no-deps" not in flags:
        return dict(view, flags=[*flags, "no-deps"])
    return view


def flag_words(step: dict) -> str:
    return "".join(f" --{flag}" for flag in step.get("flags", []))


def env_words(step: dict, out: Out) -> str:
    return "".join(f"{k}={out.word(val)} " for k, val in sorted(step.get("env", {}).items()))


def prebuilt_lines(step: dict, out: Out) -> list[str]:
    """A wheel that replaces a build (`prebuilt`): from `--source wheels=DIR` or the locked artifact's stage."""
    choice = step["choice"]
    if choice["how"] == "wheels":
        mount = f"--mount=type=bind,from={out.wheels_context},target={out.wheels_dir}"
        path = f"{out.wheels_dir}/{choice['file']}"
    else:
        mount = out.artifact_mount(choice["name"])
        path = f"{out.artifact_dir}/{choice['name']}/{choice['file']}"
    install = f"pip install {out.pip_opts()} --no-deps {out.word(path)}"
    return [run(f"{mount} {out.index_mount()}", [out.index_env(), install])]


def patch_line(p: dict, out: Out) -> str:
    """A patch to a third-party tree: check first, apply with full context, then prove the result by a reverse check.
    Never --unidiff-zero, never `|| true`: any mismatch fails the build. git applies it as to plain files
    (GIT_DIR names no repository): inside a repository, in a folder below its top, `git apply` would skip every
    path outside that folder and still exit 0."""
    tree = '"$tree"' if "package" in p else out.word(p["tree"])
    find = ""
    if "package" in p:
        code = "import importlib.util, sys; print(importlib.util.find_spec(sys.argv[1]).submodule_search_locations[0])"
        find = f'tree="$({out.word(out.python)} -c {out.word(code)} {out.word(p["package"])})" &&'
    file = out.word("/tmp/patches/" + posixpath.basename(p["file"]))
    strip = int(p.get("strip", 1))
    apply = f"GIT_DIR=/nonexistent git -C {tree} apply"
    ref = f'test "$(git -C {tree} rev-parse HEAD)" = {out.word(p["ref"])} &&' if "ref" in p else ""
    return run(
        "--mount=type=bind,source=patches,target=/tmp/patches",
        [
            find,
            ref,
            f"{apply} --check -p{strip} {file} &&",
            f"{apply} -p{strip} {file} &&",
            f"{apply} --reverse --check -p{strip} {file}",
        ],
    )


def need_pin(name: str, v: dict, where: Where, sub: str) -> None:
    if name not in (v.get("pip") or {}):
        raise where.error(sub, f"{short(name)} is not in the variant's `pip` table (pins live there, steps name them)")


def need_component(name: str, v: dict, where: Where, sub: str) -> dict:
    comp = (v.get("components") or {}).get(name)
    if comp is None:
        raise where.error(sub, f"{short(name)} is not a component of the variant")
    return comp


def need_artifact(name, v: dict, where: Where, sub: str, wheel: bool = False) -> dict:
    """The record of a family artifact that names one file (locked or pending); a wheel when `wheel`."""
    record = (v.get("artifacts") or {}).get(name) if isinstance(name, str) else None
    if record is None:
        raise where.error(sub, f"{short(name)} is not an artifact of the family (declare it under `artifacts`)")
    if "url" not in record:
        raise where.error(sub, f"artifact {short(name)} is a whole release; a step reads one file (declare it by url)")
    if wheel and art.wheel_dist(art.file_name(record)) is None:
        raise where.error(sub, f"artifact {short(name)} is not a wheel: {short(art.file_name(record))}")
    return record


def check_prebuilt(step: dict, v: dict, where: Where) -> None:
    if "prebuilt" in step:
        need_artifact(step["prebuilt"], v, where, "prebuilt", wheel=True)


def with_prebuilt(step: dict, v: dict, target: str) -> dict:
    """A step's view with its prebuilt choice (toolkit/plan/artifacts.py) and the artifact it then reads."""
    choice = art.prebuilt_choice(step, v.get("artifacts") or {}, v.get("wheels") or ())
    if choice is None:
        return step
    reads = [choice["name"]] if choice["how"] == "artifact" else []
    return dict(step, choice=choice, target=target, reads_artifacts=reads)


def check_compile(step: dict, v: dict, where: Where) -> None:
    """A `compile` record is whole (a positive memory figure and where it comes from), names no variable the step
    sets itself, and the variant's MAX_JOBS (a `--set` included) is empty or a positive integer."""
    c = step.get("compile")
    if c is None:
        return
    if c.get("gib_per_job", 0) < 1:
        raise where.error(
            "compile.gib_per_job", "one compiler job's peak memory in GiB (a positive integer) is required"
        )
    if c.get("cpus_per_job", 1) < 1:
        raise where.error("compile.cpus_per_job", "a positive integer (the CPUs one compiler job keeps busy)")
    if not c.get("record", "").strip() or CONTROL_RE.search(c["record"]):
        raise where.error("compile.record", "one line saying where the figures come from (docs, setup.py, measured)")
    env = step.get("env", {})
    par = c.get("parallel")
    if par is not None:
        if not IDENT_RE.fullmatch(par.get("env", "")) or par["env"] == JOBS_ARG:
            raise where.error("compile.parallel.env", f"the variable the build reads, not {JOBS_ARG}")
        if par.get("max", 0) < 1:
            raise where.error("compile.parallel.max", "a positive integer is required")
    for name in (JOBS_ARG, *([par["env"]] if par else [])):
        if name in env:
            raise where.error(f"env.{name}", "set by the step's `compile` from the worker's CPUs and memory")
    given = (v.get("args") or {}).get(JOBS_ARG)
    if given not in (None, "") and whole(given, 1, MAX_JOBS_GIVEN) is None:
        raise where.error(
            "compile",
            f"args.{JOBS_ARG} is empty (sized per step) or a whole number from 1 to {MAX_JOBS_GIVEN}, "
            f"got {short(given)}",
        )


def jobs_words(step: dict, out: Out) -> str:
    """The start of a compiling step's command: image_tools/jobs.py sets MAX_JOBS (and the parallel variable)
    for what follows `--` and runs it; empty for a step without `compile`."""
    c = step.get("compile")
    if c is None:
        return ""
    words = [out.word(out.python), "/tmp/tools/jobs.py", "--gib-per-job", str(int(c["gib_per_job"]))]
    words += ["--cpus-per-job", str(int(c.get("cpus_per_job", 1)))]
    if "parallel" in c:
        words += ["--parallel-env", out.word(c["parallel"]["env"]), "--parallel-max", str(int(c["parallel"]["max"]))]
    return " ".join(words) + " -- "


def with_tools(mounts: str, step: dict) -> str:
    """A RUN's mounts, with the context's tools/ folder where the step runs one of them."""
    return f"{TOOLS_MOUNT} {mounts}" if "compile" in step and TOOLS_MOUNT not in mounts else mounts


def check_flags_env(step: dict, v: dict, where: Where) -> None:
    for i, flag in enumerate(step.get("flags", [])):
        if flag not in PIP_FLAGS:
            raise where.error(f"flags[{i}]", f"unknown pip flag {short(flag)}; known: {', '.join(PIP_FLAGS)}")
    for name, value in step.get("env", {}).items():
        if not IDENT_RE.fullmatch(name):
            raise where.error(f"env.{short(name, 40, quote=False)}", "names are identifiers")
        check_refs(value, v.get("args") or {}, where, f"env.{name}")
