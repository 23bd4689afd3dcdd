#!/usr/bin/env python3
"""Rehearse a variant's source-built steps on a host without Docker (a GPU host), from the render itself.

Two halves, because the GPU host has no network and this one has no GPU:

    python3 -m ci.gpu_rehearsal prepare --target cu13-x86 --step flash_attention --step apex \\
        --source flash_attention=FA.tar.gz --source flash_attention/csrc/cutlass=CUTLASS.tar.gz \\
        --env MAX_JOBS=8 --arch-list 9.0 -o .rehearsal
    python3 -m ci.gpu_rehearsal run .rehearsal --out DIR          # there: offline, bash, the host's torch

`prepare` renders the variant, takes each selected step's RUN instruction exactly as `toolkit.render.dockerfile` writes
it, maps its BuildKit mounts (`--mount=type=bind,from=src-NAME,target=T` becomes the component's source, staged into the
folder; the pip-ca secret mount is dropped, an absent secret is what the step already allows), downloads the sdists of
its pip pins from the index the host's pip is configured with, and writes `plan.json`. `run` unpacks each mount's source
at its target, runs the step's shell text verbatim with the Dockerfile's SHELL (bash -o pipefail) into a scratch prefix
(`PIP_PREFIX`: the host's python is itself a virtual environment holding torch, so a nested venv's system site would not
see torch; a prefix keeps the host's python and torch and installs only what the step builds), pip offline against the
carried sdists, then imports each module the step produced in a fresh process (bare, and after torch, as miles imports
it) and runs the step's probes. Shrink knobs (`--env`, `--step-env`, `--arch-list`) are explicit and printed with
every result; nothing else differs from the image's step.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python3 ci/gpu_rehearsal.py` as well as `-m ci.gpu_rehearsal`
    sys.path.insert(0, str(ROOT))

from toolkit.errors import UsageError, short  # noqa: E402
from toolkit.strict import MAX_SECONDS, option_whole  # noqa: E402

PLAN = "plan.json"
MAX_PLAN_BYTES = 16 << 20  # a plan holds each step's instruction text: a few hundred KiB
SECRET_MOUNT = "type=secret"
SRC_PREFIX = "src-"
# Each kernel step's call-and-compare probes (verify/probes/), by the selector that names the step.
PROBES = {
    "flash-attn": ["kernel_flash_attn.py"],
    "flash_attention": ["kernel_flash_attn3.py"],
    "fast_hadamard_transform": ["kernel_hadamard.py"],
    "causal-conv1d": ["kernel_causal_conv1d.py", "kernel_selective_scan.py"],
    "apex": ["kernel_apex.py"],
    "miles/int4_qat": ["kernel_int4_quant.py"],
    "transformer-engine-torch": ["kernel_te_linear.py"],
}
# The bridge step's proof is its own GPU suite (the bits tests among it), run against the copy the step installed.
BRIDGE = "bridge"
SUITES = {
    BRIDGE: {
        "argv": ["-m", "pytest", "bridge/tests/gpu", "-m", "gpu", "-o", "pythonpath=tests", "-p", "no:cacheprovider"],
        "env": {"SGLANG_ATTN_BRIDGE_UNDER_TEST": "installed", "TRITON_INTERPRET": "0"},
        "timeout": 300,
    }
}
CONTEXT_SKIP = ("__pycache__", ".pytest_cache", "build")  # what a build context of the tree never needs
# A build context folder that is not the checkout's folder of the same name (toolkit/render/context.py stages it).
CONTEXT_FOLDERS = {"tools": "image_tools"}


def names_of(view: dict) -> list[str]:
    """What a step answers to: a pip step its pins, a source step its component (and COMPONENT/LAST-SUBDIR)."""
    if view["kind"] == "pip":
        return [name for name, _ in view["pins"]]
    if view["kind"] == "source":
        sub = view.get("subdir") or ""
        return [view["name"]] + ([f"{view['name']}/{sub.rstrip('/').rsplit('/', 1)[-1]}"] if sub else [])
    return []


def step_texts(plan) -> list[tuple[dict, str]]:
    """Each step's text as the family template writes it: the lines its kind emits with render()'s own context."""
    from toolkit.render.dockerfile import context

    return [(view, "\n".join(view["lines"]).strip("\n")) for view in context(plan)["steps"]]


def split_run(text: str) -> tuple[list[str], str]:
    """A RUN instruction -> (its --mount flags, the shell text BuildKit hands the SHELL)."""
    if not text.startswith("RUN ") or re.search(r"^(?!RUN |    )", text, re.M):
        first = text.split()[0]
        raise UsageError(f"not a single RUN instruction (starts {short(first)}): only RUN steps can be rehearsed")
    joined = text[4:].replace("\\\n", "")  # the Dockerfile parser's line continuation
    flags = []
    rest = joined.lstrip()
    while rest.startswith("--mount="):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    return flags, rest


def parse_mount(flag: str) -> dict:
    fields = {}
    for item in flag[len("--mount=") :].split(","):
        key, _, value = item.partition("=")
        fields[key] = value
    return fields


def build_env_before(full: str, text: str) -> dict:
    """The ARG defaults and ENV values of the stage in force where the step's text starts: BuildKit hands both to
    the RUN's environment (ENV `${NAME}` references expanded from the ARGs, as the Dockerfile does)."""
    head = full[: full.index(text)]
    stage = head[head.rindex("\nFROM ") :].replace("\\\n", "")
    env: dict[str, str] = {}
    for _kind, rest in re.findall(r"^(ARG|ENV) (.*)$", stage, re.M):
        for word in shlex.split(rest):
            key, _, value = word.partition("=")
            env[key] = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), value)
    return env


def bridge_text(full: str) -> str:
    """The bridge step as the family template writes it: the RUN that bind-mounts the context's bridge/ folder."""
    found = re.findall(r"^RUN --mount=type=bind,source=bridge,(?:[^\n]*\\\n)*[^\n]*", full, re.M)
    if len(found) != 1:
        raise UsageError(f"--step {BRIDGE}: the render has {len(found)} RUN instructions mounting bridge/, not 1")
    return found[0]


def select(plan, selectors: list[str], full: str = "") -> list[tuple[str, dict, str]]:
    found = []
    texts = step_texts(plan)
    for sel in selectors:
        if sel == BRIDGE:
            found.append((sel, {"kind": BRIDGE}, bridge_text(full)))
            continue
        hits = [(view, text) for view, text in texts if sel in names_of(view)]
        if not hits:
            known = sorted({n for view, _ in texts for n in names_of(view)} | {BRIDGE})
            raise UsageError(f"--step {short(sel)}: no step of {plan.name} has that name; known: {', '.join(known)}")
        if len(hits) > 1:
            raise UsageError(f"--step {short(sel)}: names {len(hits)} steps of {plan.name}; use COMPONENT/SUBDIR")
        found.append((sel, *hits[0]))
    return found


def parse_pairs(items: list[str], flag: str) -> dict:
    pairs = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UsageError(f"{flag} {short(item)}: expected NAME=VALUE")
        pairs[key] = value
    return pairs


def load_variant(target: str):
    from toolkit.spec.catalog import load_catalog

    return load_catalog().resolve(target)


def build_plan(target: str, selectors: list[str], env=(), step_env=(), arch_list=None, timeout=540) -> dict:
    """The plan without staging: what each selected step runs, from the render, and the knobs over it."""
    from toolkit.plan.build_plan import make_plan
    from toolkit.render.dockerfile import render
    from toolkit.spec.catalog import load_catalog

    plan = make_plan(load_catalog().resolve(target), revision="rehearsal")
    full = render(plan)
    shell = json.loads(re.search(r"^SHELL (\[.*\])$", full, re.M).group(1))  # type: ignore[union-attr]
    per_step: dict[str, list[str]] = {}
    for item in step_env:
        sel, colon, pair = item.partition(":")
        if not colon:
            raise UsageError(f"--step-env {short(item)}: expected STEP:NAME=VALUE")
        per_step.setdefault(sel, []).append(pair)
    unknown = sorted(set(per_step) - set(selectors))
    if unknown:
        raise UsageError(f"--step-env {short(unknown[0])}: not a selected --step")
    knobs: dict = {"env": parse_pairs(list(env), "--env")}
    if arch_list:
        if not re.fullmatch(r"[0-9]+\.[0-9]+a?(\+PTX)?([; ][0-9]+\.[0-9]+a?(\+PTX)?)*", arch_list):
            raise UsageError(f"--arch-list {short(arch_list)}: expected e.g. 9.0 or '8.0;9.0a'")
        knobs["env"]["TORCH_CUDA_ARCH_LIST"] = arch_list
    steps = []
    for sel, view, text in select(plan, selectors, full):
        if text not in full:
            raise UsageError(f"--step {short(sel)}: its text is not in the render of {plan.name}")
        flags, command = split_run(text)
        mounts, dropped = [], []
        for flag in flags:
            m = parse_mount(flag)
            if m.get("type") == "secret":
                dropped.append(flag)
            elif m.get("type") == "bind" and m.get("from", "").startswith(SRC_PREFIX):
                mounts.append({"source": m["from"][len(SRC_PREFIX) :], "target": m["target"]})
            elif m.get("type") == "bind" and "from" not in m and m.get("source"):
                mounts.append({"context": m["source"], "target": m["target"]})  # a folder of the build context
            else:
                raise UsageError(f"--step {short(sel)}: mount {short(flag)} has no local stand-in")
        steps.append(
            {
                "selector": sel,
                "kind": view["kind"],
                "instruction": text,
                "command": command,
                "mounts": mounts,
                "dropped_mounts": dropped,
                "pins": [list(p) for p in view.get("pins", [])],
                "dockerfile_env": build_env_before(full, text),
                "env": parse_pairs(per_step.get(sel, []), "--step-env"),
                "probes": PROBES.get(sel, []),
                "suites": [SUITES[sel]] if sel in SUITES else [],
                "timeout": timeout,
            }
        )
    return {"variant": plan.name, "shell": shell, "knobs": knobs, "steps": steps}


# ---- prepare: staging (this host) ----


def normalized_tar(path: Path, dest: Path) -> None:
    """A folder or tarball -> a .tar.gz whose members are relative to the tree's root (one top folder stripped)."""
    if path.is_dir():
        with tarfile.open(dest, "w:gz") as out:
            out.add(path, arcname=".")
        return
    with tarfile.open(path) as src:
        members = src.getmembers()
        tops = {m.name.lstrip("./").split("/", 1)[0] for m in members if m.name.lstrip("./")}
        strip = len(tops) == 1 and all(m.isdir() for m in members if m.name.lstrip("./") in tops)
        with tarfile.open(dest, "w:gz") as out:
            for m in members:
                name = m.name.lstrip("./")
                if strip:
                    name = name.split("/", 1)[1] if "/" in name else ""
                if not name:
                    continue
                m.name = name
                out.addfile(m, src.extractfile(m) if m.isfile() else None)


def context_member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = Path(info.name).name
    return None if name in CONTEXT_SKIP or name.endswith(".egg-info") else info


def archive_commit(path: Path) -> str | None:
    """The commit a `git archive` tarball records in its pax header (None for a folder or another tarball)."""
    if path.is_dir():
        return None
    with tarfile.open(path) as tar:
        tar.next()
        return tar.pax_headers.get("comment")


def pip_index() -> tuple[str, ssl.SSLContext | None]:
    """The index and CA bundle this host's pip uses (its environment, then its config), never a written-in host."""

    def conf(key: str) -> str | None:
        run = subprocess.run([sys.executable, "-m", "pip", "config", "get", key], capture_output=True, text=True)
        return run.stdout.strip() or None

    index = os.environ.get("PIP_INDEX_URL") or conf("global.index-url") or "https://pypi.org/simple"
    cert = os.environ.get("PIP_CERT") or conf("global.cert")
    return index, (ssl.create_default_context(cafile=cert) if cert else None)


def download_sdist(name: str, version: str, dest: Path) -> Path:
    """The pin's sdist from the simple index (pip download would run its setup.py, which needs torch here)."""
    index, ctx = pip_index()
    page = index.rstrip("/") + "/" + name + "/"
    with urllib.request.urlopen(page, context=ctx, timeout=60) as r:
        html = r.read().decode()
    norm = re.sub(r"[-_.]+", "[-_.]", re.escape(name).replace("\\", ""))
    pattern = re.compile(rf"^{norm}-{re.escape(version)}\.tar\.gz$", re.I)
    for href in re.findall(r'href="([^"]+)"', html):
        url = urllib.parse.urljoin(page, href)
        file = urllib.parse.unquote(url.split("#", 1)[0].rsplit("/", 1)[-1])
        if pattern.match(file):
            target = dest / file
            with urllib.request.urlopen(url, context=ctx, timeout=300) as r, open(target, "wb") as f:
                shutil.copyfileobj(r, f)
            return target
    raise UsageError(f"{name}=={version}: the index has no sdist of it")


def prepare(args) -> int:
    plan = build_plan(args.target, args.step, args.env, args.step_env, args.arch_list, args.timeout)
    out = Path(args.output)
    sources: dict[str, list[tuple[str, Path]]] = {}
    for item in args.source:
        key, eq, path = item.partition("=")
        if not eq or not Path(path).exists():
            raise UsageError(f"--source {short(item)}: expected NAME[/SUBPATH]=EXISTING_PATH")
        name, _, sub = key.partition("/")
        sources.setdefault(name, []).append((sub, Path(path)))
    pins = {name: c.get("ref") for name, c in (load_variant(args.target).components or {}).items()}
    for name, entries in sources.items():
        for sub, path in entries:
            commit = None if sub else archive_commit(path)
            if commit and pins.get(name) and commit != pins[name]:
                raise UsageError(
                    f"--source {name}={short(str(path))}: an archive of {commit[:12]}, the pin is {pins[name]}"
                )
    (out / "src").mkdir(parents=True, exist_ok=True)
    (out / "sdists").mkdir(exist_ok=True)
    for step in plan["steps"]:
        for mount in step["mounts"]:
            if "context" in mount:  # the build context is this checkout: its folder, as BuildKit would send it
                file = f"src/context--{mount['context'].replace('/', '--')}.tar.gz"
                with tarfile.open(out / file, "w:gz") as tar:
                    tar.add(
                        ROOT / CONTEXT_FOLDERS.get(mount["context"], mount["context"]),
                        arcname=".",
                        filter=context_member,
                    )
                mount["archives"] = [["", file]]
                continue
            name = mount["source"]
            if name not in sources:
                raise UsageError(f"--step {short(step['selector'])} mounts src-{name}: give --source {name}=PATH")
            mount["archives"] = []
            for sub, path in sources[name]:
                file = f"src/{name}{('--' + sub.replace('/', '--')) if sub else ''}.tar.gz"
                if not (out / file).exists():
                    normalized_tar(path, out / file)
                mount["archives"].append([sub, file])
        for pin, version in step["pins"]:
            have = list((out / "sdists").glob(f"{re.sub(r'[-_.]+', '?', pin)}-{version}.tar.gz"))
            step.setdefault("sdists", []).append(
                "sdists/" + (have[0] if have else download_sdist(pin, version, out / "sdists")).name
            )
    (out / PLAN).write_text(json.dumps(plan, indent=2) + "\n")
    for step in plan["steps"]:
        print(f"{step['selector']}: {step['command'][-160:]}")
    print(f"knobs: {json.dumps(plan['knobs'])}; plan written to {out / PLAN}")
    return 0


# ---- run: execution (the GPU host, offline) ----


def unpack(archive: Path, target: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")


def site_dir(prefix: Path) -> Path | None:
    found = sorted(prefix.glob("lib*/python3*/site-packages"))
    return found[0] if found else None


def modules_in(site: Path | None) -> list[str]:
    """The import names the step left: packages, extension modules and plain modules at the top of site-packages."""
    if site is None:
        return []
    names = set()
    for entry in site.iterdir():
        if entry.name.endswith((".dist-info", ".egg-info", ".pth")) or entry.name == "__pycache__":
            continue
        if entry.is_dir() and (entry / "__init__.py").exists():
            names.add(entry.name)
        elif entry.suffix in (".so", ".py"):
            names.add(entry.name.split(".", 1)[0])
    return sorted(names)


def run_proc(argv, env, log: Path, timeout: float, cwd=None) -> tuple[int, float]:
    """argv in its own process group, output to log; the group is killed at the timeout (rc 124)."""
    start = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
        try:
            rc = proc.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = 124
    return rc, round(time.monotonic() - start, 1)


GENERIC = re.compile(r"subprocess-exited-with-error|metadata-generation-failed|failed-wheel-build|^hint:|^note:|^╰|^×")


def first_cause(log: Path) -> str:
    """The log's most telling error line: the last error line that is not one of pip's generic wrappers."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    causes = [line for line in lines if re.search(r"(Error|error)\b", line) and not GENERIC.search(line)]
    return (causes[-1] if causes else last_line(log))[-300:]


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][-300:] if lines else ""


@contextlib.contextmanager
def mount_lock(target: Path, selector: str):
    """The mount's target to this run alone while the step is staged and built: it is the path the image's RUN
    names, the same for every run of the step, so a second run waits here instead of staging over the first."""
    lock = target.with_name(target.name + ".rehearsal-lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{selector}: waiting for another rehearsal run that holds {target}", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def run_step(step: dict, plan: dict, home: Path, scratch: Path, logs: Path, deadline: float) -> dict:
    sel = step["selector"]
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", sel)
    work = scratch / tag
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    pip = work / "bin" / "pip"  # the rendered `pip` is the image's python's pip; here that is python3 -m pip
    pip.write_text(f'#!/bin/sh\nexec {sys.executable} -m pip "$@"\n')
    pip.chmod(0o755)
    if shutil.which("git") is None:  # FA3's setup.py runs `git submodule update` unchecked; the image has git
        (work / "bin" / "git").write_text("#!/bin/sh\necho 'git: not on this host (rehearsal stand-in)' >&2\nexit 1\n")
        (work / "bin" / "git").chmod(0o755)
    env = dict(os.environ)
    env.pop("PIP_CERT", None)
    env.update(
        PATH=f"{work / 'bin'}:{os.path.dirname(sys.executable)}:{env.get('PATH', '')}",
        PIP_PREFIX=str(work / "prefix"),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(home / "sdists"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONUNBUFFERED="1",
    )
    if re.search(r"(^|\s)--no-deps(\s|$)", step["command"]):
        # Into the prefix without uninstalling the host's copy of the same distribution (pip does, even with a
        # prefix): with no dependencies to resolve, ignoring what is installed changes nothing else.
        env["PIP_IGNORE_INSTALLED"] = "1"
    env.update(step["dockerfile_env"])
    env.update(plan["knobs"]["env"])
    env.update(step["env"])
    log = logs / f"{tag}.build.log"
    log.write_text(f"$ {step['command']}\n# knobs: {json.dumps({**plan['knobs']['env'], **step['env']})}\n")
    with contextlib.ExitStack() as held:
        for mount in step["mounts"]:
            target = Path(mount["target"])
            held.enter_context(mount_lock(target, sel))
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for sub, file in mount["archives"]:
                unpack(home / file, target / sub if sub else target)
        left = min(step["timeout"], deadline - time.monotonic())  # a wait for the mount counts against the deadline
        rc, seconds = run_proc([*plan["shell"], step["command"]], env, log, left, cwd=work)
    site = site_dir(work / "prefix")
    mods = modules_in(site)
    result = {"selector": sel, "rc": rc, "seconds": seconds, "modules": mods, "log": log.name, "imports": {}}
    result["error"] = "" if rc == 0 else first_cause(log)
    run_env = dict(env, PYTHONPATH=f"{site}:{env.get('PYTHONPATH', '')}" if site else env.get("PYTHONPATH", ""))
    for mod in mods:
        for how, code in (("bare", f"import {mod}"), ("after_torch", f"import torch, {mod}")):
            ilog = logs / f"{tag}.import.log"
            with open(ilog, "a") as f:
                f.write(f"$ python3 -c {code!r}\n")
            irc, _ = run_proc([sys.executable, "-c", code], run_env, ilog, 120)
            result["imports"].setdefault(mod, {})[how] = "ok" if irc == 0 else f"rc={irc}: {last_line(ilog)[-160:]}"
    result["probes"] = {}
    for probe in step["probes"] if rc == 0 else []:
        plog = logs / f"{tag}.{probe}.log"
        plog.write_text("")
        prc, psec = run_proc([sys.executable, str(ROOT / "verify" / "probes" / probe)], run_env, plog, 100)
        result["probes"][probe] = {"rc": prc, "seconds": psec, "last": last_line(plog)}
    for suite in step.get("suites", []) if rc == 0 else []:
        slog = logs / f"{tag}.suite.log"
        slog.write_text(f"$ python3 {shlex.join(suite['argv'])}  # {json.dumps(suite['env'])}\n")
        argv, suite_env = [sys.executable, *suite["argv"]], dict(run_env, **suite["env"])
        src, ssec = run_proc(argv, suite_env, slog, suite["timeout"], ROOT)
        result["probes"][shlex.join(suite["argv"][:3])] = {"rc": src, "seconds": ssec, "last": last_line(slog)}
    return result


def narrowed(suite: dict, paths: list[str], timeout: int | None) -> dict:
    """A suite cut to some of its paths or given another limit: a budget knob, recorded in the suite's argv."""
    argv = list(suite["argv"])
    if paths:
        at = argv.index("pytest") + 1
        argv[at : at + 1] = paths
    return dict(suite, argv=argv, timeout=timeout or suite["timeout"])


def environment_line() -> str:
    def cmd(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError:
            return "absent"

    gpu = cmd(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).replace("\n", "; ")
    torch = cmd([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda)"])
    nvcc = (re.findall(r"release [0-9.]+, V[0-9.]+", cmd(["nvcc", "--version"])) or ["absent"])[0]
    return f"GPU {gpu}; torch {torch}; nvcc {nvcc}; python {sys.version.split()[0]}; {os.cpu_count()} cores"


STR, STRS, PAIRS = str, [str], {str: str}
STEP_SHAPE = {
    "selector": STR,
    "instruction": STR,
    "command": STR,
    "mounts": [{"target": STR, "archives": [[str]]}],
    "dockerfile_env": PAIRS,
    "env": PAIRS,
    "probes": STRS,
    "suites": [{"argv": STRS, "env": PAIRS, "timeout": "seconds"}],
    "timeout": "seconds",
}
PLAN_SHAPE = {"variant": STR, "shell": STRS, "knobs": {"env": PAIRS}, "steps": [STEP_SHAPE]}


def shape_problem(value, shape, key: str) -> str | None:
    """Where `value` is not of `shape` (a type, [item shape], {str: value shape}, {key: shape} of required keys,
    or "seconds": a whole number from 1 to MAX_SECONDS), as `KEY: problem`; None when it is."""
    if shape == "seconds":
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_SECONDS
        return None if ok else f"{key}: expected a whole number of seconds from 1 to {MAX_SECONDS}"
    if isinstance(shape, type):
        return None if isinstance(value, shape) else f"{key}: expected {shape.__name__}"
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{key}: expected a list"
        return next(filter(None, (shape_problem(v, shape[0], f"{key}[{i}]") for i, v in enumerate(value))), None)
    if not isinstance(value, dict):
        return f"{key}: expected an object"
    if list(shape) == [str]:
        return next(filter(None, (shape_problem(v, shape[str], f"{key}.{k}") for k, v in value.items())), None)
    for k, sub in shape.items():
        if k not in value:
            return f"{key}.{k}: missing"
        problem = shape_problem(value[k], sub, f"{key}.{k}")
        if problem:
            return problem
    return None


def load_plan(home: Path) -> dict:
    """plan.json as `prepare` wrote it (a regular file, at most MAX_PLAN_BYTES, of the shape `run` reads), or a
    UsageError naming the file and the first key that is not."""
    from toolkit import json_input

    path = home / PLAN
    try:
        plan = json_input.load_file(path, MAX_PLAN_BYTES)
    except OSError as e:
        raise UsageError(f"{short(str(path), 200, quote=False)}: {e.strerror or type(e).__name__}") from None
    except json_input.BadJson as e:
        raise UsageError(f"{short(str(path), 200, quote=False)}: {e}") from None
    problem = shape_problem(plan, PLAN_SHAPE, "plan")
    if problem:
        raise UsageError(f"{short(str(path), 200, quote=False)}: {problem} (write it with `prepare`)")
    assert isinstance(plan, dict)
    return plan


def run(args) -> int:
    home = Path(os.path.realpath(args.plan_dir))
    plan = load_plan(home)
    chosen = [s for s in plan["steps"] if not args.only or s["selector"] in args.only]
    for step in chosen:
        step["suites"] = [narrowed(suite, args.suite_path, args.suite_timeout) for suite in step.get("suites", [])]
    out = Path(args.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch)
    deadline = time.monotonic() + args.deadline
    print(f"environment: {environment_line()}", flush=True)
    print(f"knobs: {json.dumps(plan['knobs'])}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(len(chosen), 1)) as pool:
        futures = [pool.submit(run_step, s, plan, home, scratch, logs, deadline) for s in chosen]
        results = [f.result() for f in futures]
    for step, result in zip(chosen, results):
        result["knobs"] = {**plan["knobs"]["env"], **step["env"]}
        result["instruction"] = step["instruction"]
    report = {"variant": plan["variant"], "environment": environment_line(), "results": results}
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))
    return 0 if all(r["rc"] == 0 and all(p["rc"] == 0 for p in r["probes"].values()) for r in results) else 1


def table(results: list[dict]) -> str:
    rows = [
        "| step | built | seconds | modules | import after torch | bare import | probes | knobs |",
        "|" + "---|" * 8,
    ]
    for r in results:
        after = ", ".join(f"{m}:{i.get('after_torch', '?')[:40]}" for m, i in r["imports"].items())
        bare = ", ".join(f"{m}:{i.get('bare', '?')[:60]}" for m, i in r["imports"].items())
        probes = "; ".join(f"{p} rc={v['rc']} {v['last'][:120]}" for p, v in r["probes"].items())
        built = "yes" if r["rc"] == 0 else f"no (rc {r['rc']}: {r['error'][:160]})"
        rows.append(
            f"| {r['selector']} | {built} | {r['seconds']} | {' '.join(r['modules'])} | {after} | {bare} | "
            f"{probes} | {' '.join(f'{k}={v}' for k, v in r['knobs'].items())} |"
        )
    return "\n".join(rows)


SECONDS = option_whole(1, MAX_SECONDS, "of seconds")  # a bound a wait can take: never 0, negative or odd


def main(argv=None) -> int:
    from toolkit.cli import parse

    parser = argparse.ArgumentParser(prog="ci.gpu_rehearsal", description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("prepare", help="stage sources and sdists, write plan.json (here)")
    p.add_argument("--target", required=True)
    p.add_argument("--step", action="append", required=True, help="a pip name, COMPONENT or COMPONENT/SUBDIR")
    p.add_argument("--source", action="append", default=[], help="NAME[/SUBPATH]=DIR|TARBALL (at the pin)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE over every step (a shrink knob)")
    p.add_argument("--step-env", action="append", default=[], help="STEP:NAME=VALUE over one step")
    p.add_argument("--arch-list", help="TORCH_CUDA_ARCH_LIST for every step (a shrink knob)")
    p.add_argument("--timeout", type=SECONDS, default=540, help="seconds per step build")
    p.add_argument("-o", "--output", required=True, help="the folder to carry")
    r = sub.add_parser("run", help="execute plan.json offline (on the GPU host)")
    r.add_argument("plan_dir")
    r.add_argument("--out", required=True)
    r.add_argument("--scratch", default="/tmp/rehearsal")
    r.add_argument("--only", action="append", default=[], help="run only these steps")
    r.add_argument("--deadline", type=SECONDS, default=560, help="seconds from start after which builds are stopped")
    r.add_argument("--suite-path", action="append", default=[], help="run only these paths of a step's suite")
    r.add_argument("--suite-timeout", type=SECONDS, help="seconds for a step's suite (its own limit otherwise)")
    args = parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        return prepare(args) if args.verb == "prepare" else run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
