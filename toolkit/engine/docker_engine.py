"""The one interface to the container engine: the docker SDK for the engine API, the buildx CLI for BuildKit.

The SDK cannot drive BuildKit (secrets, bind mounts, cache export), so builds go through `docker buildx build`
and every other BuildKit call (a builder's inspect, registry manifests through `imagetools`) through `buildx`,
each bounded and named when unanswered; everything else (ping, inspect, tag, push, containers) goes through the SDK.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from toolkit.engine.calls import IMPORT_TIMEOUT, FirstStep, engine_timeout, unanswered
from toolkit.errors import BuildFailed, EngineUnavailable, Interrupted, short
from toolkit.gates.report import failure_lines, step_lines
from toolkit.plan import artifacts
from toolkit.progress import BuildKitSteps, Heartbeat, ticking
from verify.report import failures, find_report

START_HINT = "start one with `sudo dockerd &` (or run ci/setup.sh), or point DOCKER_HOST at a running engine"
STEP_RE = re.compile(r"^#(\d+) (.*)$")
LOG_RE = re.compile(r"^\d+\.\d+ (.*)$")
GATE_STEP = "-m verify --config gates.json --nonce"  # how the gate step's name reads (templates/partials/gates.j2)
BRIDGE_STEP = "target=/tmp/sglang-attn-bridge"  # the bridge install step's mount (templates/partials/bridge.j2)
# How BuildKit names the exporter's push: "pushing REF with docker" (docker driver), "exporting to image" (others).
PUSH_STEP_RE = re.compile(r"^(pushing \S+ with docker|exporting to image)$")


OCI_ARCHIVE = "image.oci.tar"  # a build's image when it comes back as an archive (BuildSite.oci), in its own folder
LOADED_RE = re.compile(r"^Loaded image ID: (sha256:[0-9a-f]{64})$", re.M)  # `docker load` of an archive without names


class PushFailed(BuildFailed):
    """Every step passed, gates included, and the builder's own push of the image failed: the build may be run
    again (its steps come from the builder's cache) when the registry's answer says it may pass (toolkit/retry.py)."""


PING_TIMEOUT = 10  # seconds: an engine that accepts and never answers is as absent as one that refuses
STOP_GRACE = 30  # seconds the stopped build child gets to cancel its BuildKit session before SIGKILL


def connect(host: str | None = None):
    """A docker SDK client for the engine at `host` (default: DOCKER_HOST) that answers within PING_TIMEOUT, else
    EngineUnavailable (exit 3)."""
    try:
        import docker

        if host:
            client = docker.DockerClient(base_url=host, timeout=PING_TIMEOUT)
        else:
            client = docker.from_env(timeout=PING_TIMEOUT)
        client.ping()
    except Exception as e:  # the SDK raises DockerException, requests errors or FileNotFoundError
        if "timed out" in str(e).lower():
            reason = f"no answer within {PING_TIMEOUT}s"
        else:
            reason = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise EngineUnavailable(f"no Docker engine answers ({reason}); {START_HINT}") from None
    client.api.timeout = engine_timeout()  # every later request is bounded too (toolkit/engine/calls.py)
    return client


def docker_cmd() -> str:
    """The docker client, else EngineUnavailable (exit 3)."""
    docker_bin = shutil.which("docker")
    if docker_bin is None:
        raise EngineUnavailable(f"no docker client on PATH; {START_HINT}")
    return docker_bin


def buildx_cmd() -> list:
    """`docker buildx`, verified to exist (it is a CLI plugin that some clients lack); probed once per process."""
    return list(_buildx())


@functools.cache  # a failed probe raises and is not cached
def _buildx() -> tuple:
    docker_bin = docker_cmd()
    probe = _bounded([docker_bin, "buildx", "version"], "docker buildx", ("version",))
    if probe.returncode != 0:
        raise EngineUnavailable("the docker client has no buildx plugin (Debian: docker-buildx; see ci/setup.sh)")
    return docker_bin, "buildx"


def buildx(*args: str, timeout: float | None = None, on_timeout=None) -> subprocess.CompletedProcess:
    """`docker buildx ARGS` (a subcommand other than `build`: inspect, imagetools), its output captured as text,
    bounded by `timeout` seconds (default: the engine timeout). Unanswered in time: EngineUnavailable (exit 3), one
    line naming the call (`docker buildx` and the words before the first option), or `on_timeout(seconds)`'s error
    for a caller that has its own answer to a timeout."""
    return _bounded(buildx_cmd() + list(args), "docker buildx", args, timeout, on_timeout)


def docker(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`docker ARGS` (a client command the SDK has no call for: `context inspect`), bounded as `buildx` is."""
    return _bounded([docker_cmd(), *args], "docker", args, timeout)


def _bounded(cmd: list, prefix: str, args, timeout=None, on_timeout=None) -> subprocess.CompletedProcess:
    seconds = engine_timeout() if timeout is None else timeout
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        if on_timeout is not None:
            raise on_timeout(seconds) from None
        words = itertools.takewhile(lambda arg: not arg.startswith("-"), args)
        raise unanswered(f"`{prefix} {' '.join(words)}`", seconds) from None


def import_tree(folder, ref: str, tar_options: tuple = (), platform: str | None = None, labels=None) -> None:
    """`tar -c folder | docker import - ref`: an image whose one layer is exactly the folder (base images and the
    wheelhouse, made on this machine because no registry can be reached), for `platform` (default: the engine's),
    carrying `labels` ({name: value}: how `build.py clean` finds the images the project made)."""
    from toolkit.render.quoting import dockerfile_quote

    tar = subprocess.Popen(["tar", *tar_options, "-C", str(folder), "-c", "."], stdout=subprocess.PIPE)
    plat = ["--platform", platform] if platform else []
    for name, value in sorted((labels or {}).items()):
        plat += ["--change", f"LABEL {name}={dockerfile_quote(value)}"]
    try:
        imp = subprocess.run(
            [docker_cmd(), "import", *plat, "-", ref],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        tar.kill()
        raise unanswered(f"`docker import {ref}`", IMPORT_TIMEOUT) from None
    finally:
        assert tar.stdout is not None  # stdout=PIPE
        tar.stdout.close()
    if tar.wait() != 0 or imp.returncode != 0:
        raise BuildFailed(f"docker import of {ref} failed: {imp.stderr.strip()}")


@dataclass
class Step:
    name: str
    status: str = "running"
    seconds: float | None = None
    log: list = field(default_factory=list)


class ProgressParser:
    """Folds BuildKit's plain progress stream into steps; prints one line per finished step (or the raw stream)."""

    def __init__(self, out, raw: bool, verbose: bool = False):
        self.out, self.raw, self.verbose = out, raw, verbose
        self.steps: dict[str, Step] = {}
        self.tail: list = []  # lines outside any step (the final error summary)

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if self.raw:
            self.out(line)
        m = STEP_RE.match(line)
        if not m:
            self.tail.append(line)
            return
        sid, rest = m.groups()
        step = self.steps.get(sid)
        if step is None:
            self.steps[sid] = Step(name=rest)
            return
        if rest.startswith("DONE "):
            step.status, step.seconds = "done", float(rest[5:].rstrip("s"))
            self._report(step)
        elif rest == "CACHED":
            step.status = "cached"
            self._report(step)
        elif rest.startswith("ERROR"):
            step.status = "error"
            step.log.append(rest)
        else:
            lm = LOG_RE.match(rest)
            step.log.append(lm.group(1) if lm else rest)

    def _report(self, step: Step) -> None:
        if self.raw or not step.name.startswith("[") or step.name.startswith("[internal]"):
            return
        took = "cached" if step.status == "cached" else f"{step.seconds:.1f}s"
        name = " ".join(step.name.split())
        self.out(f"  {name[:100]:<100} {took:>8}")
        report = find_report(step.log)
        if report is not None:  # the gate step: its checks, from its report (toolkit/gates/report.py)
            for ln in step_lines(report, self.verbose):
                self.out(f"      {ln}")

    def gate_steps(self) -> list:
        """The gate steps BuildKit reported (one per platform): (status, the report in its log or None). A cached
        step prints no log: its report is the one its layer keeps (toolkit/gates/report.py, REPORT_PATH)."""
        return [(s.status, find_report(s.log)) for s in self.steps.values() if GATE_STEP in " ".join(s.name.split())]

    def failed_step(self) -> Step | None:
        errored = [s for s in self.steps.values() if s.status == "error"]
        return errored[-1] if errored else None


@dataclass(frozen=True)
class BuildSite:
    """Where a build runs and where its image goes (toolkit/engine/builders.py decides; every value is one argv word).

    docker/builder: `--context NAME` (buildx takes a docker context as a builder only when it is the current one),
    `--builder NAME` (any other builder), or nothing (the default engine). contexts: named contexts that map an
    image the Dockerfile names to a registry copy by digest (toolkit/engine/local_images.py). cache_from/cache_to:
    registry cache. push: the refs the image is pushed to straight from the builder (then it lands in no engine and
    nothing is returned but its digest), with BuildKit's full provenance attestation where the builder can attach
    one (`attest`). oci: the image comes back as an OCI archive whose file times BuildKit rewrote to the build's
    SOURCE_DATE_EPOCH, and is loaded into the engine from it (a docker-driver builder on the containerd image
    store, where that is the one way to a digest that reproduces: docs/architecture.md, "Build clock")."""

    docker: tuple = ()  # global options of the docker client (`--context NAME`: a docker-driver builder)
    builder: tuple = ()
    contexts: tuple = ()
    cache_from: tuple = ()
    cache_to: tuple = ()
    push: tuple = ()
    attest: bool = False
    oci: bool = False

    def args(self) -> list:
        cmd = list(self.builder)
        for name, value in self.contexts:
            cmd += ["--build-context", f"{name}={value}"]
        for ref in self.cache_from:
            cmd += ["--cache-from", ref]
        for ref in self.cache_to:
            cmd += ["--cache-to", ref]
        if self.push:
            # One CSV field holds every name, quoted (a reference never holds a quote: toolkit/spec/values.py).
            cmd += ["--output", 'type=image,push=true,"name=' + ",".join(self.push) + '"']
            # SLSA provenance, mode=max: the build's full record (its args, sources and steps; a secret by id only).
            cmd += ["--provenance=mode=max" if self.attest else "--provenance=false"]
        elif self.oci:  # no attestation: its build times would make every archive another image
            cmd += ["--provenance=false"]
        return cmd

    def output(self, folder: str) -> tuple:
        """The `--output` of an image that comes back as an OCI archive in `folder` (none otherwise)."""
        if self.push or not self.oci:
            return ()
        return ("--output", f"type=oci,dest={os.path.join(folder, OCI_ARCHIVE)},rewrite-timestamp=true")


def build(plan, invocation, out=print, gate_steps: list | None = None, verbose: bool = False) -> str:
    """Run BuildKit as `invocation` (toolkit/engine/invocation.py) says; return the image ID (or, when pushed from the
    builder, the registry's digest). Tags nothing in any engine (the caller tags after success); a pushed image is
    pushed only when every step, gates included, passed. `gate_steps` (a list) receives each gate step's status and
    the report its log holds, for the caller to judge (toolkit/gates/report.py: report_problem). `verbose`: the gate
    step's summary also lists each allowed pip-check line with its rule and reason."""
    buildx = buildx_cmd()
    for sid, src in invocation.secrets:
        if not os.path.isfile(src):
            raise BuildFailed(f"secret {sid}: no such file {src}")
    with tempfile.TemporaryDirectory() as tmp:
        iidfile, metadata = os.path.join(tmp, "iid"), os.path.join(tmp, "metadata.json")
        site = invocation.site
        cmd = invocation.argv(buildx, files=("--iidfile", iidfile, "--metadata-file", metadata, *site.output(tmp)))
        # Every line goes through the heartbeat, which names the running step when nothing was printed for a while.
        steps = BuildKitSteps()
        beat = Heartbeat(out, steps.describe)
        parser = ProgressParser(beat.say, raw=plan.progress == "plain", verbose=verbose)
        env = dict(os.environ, BUILDKIT_PROGRESS="plain", DOCKER_BUILDKIT="1")
        started = time.monotonic()
        # Its own process group: a signal to build.py reaches buildx only through stop_child, which then waits.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1, start_new_session=True
        )
        first = FirstStep(proc)  # an engine that stopped answering starts no step: exit 3, not a silent wait
        assert proc.stdout is not None  # stdout=PIPE
        try:
            with ticking(beat):
                for line in proc.stdout:
                    first.seen(line)
                    steps.feed(line)
                    parser.feed(line)
                rc = proc.wait()
        except (KeyboardInterrupt, Interrupted) as e:
            stop_child(proc, getattr(e, "signum", signal.SIGINT))
            raise
        finally:
            first.done()
            proc.stdout.close()  # read to the end or abandoned: closed here, not by the garbage collector
        if first.expired:
            raise unanswered(f"`docker buildx build` of {plan.name} (BuildKit started no step)", first.seconds)
        if rc != 0 or not os.path.exists(iidfile):
            step = parser.failed_step()
            report = find_report(step.log) if step is not None else None
            if step is not None:
                out(f"FAILED step: {' '.join(step.name.split())}")
                if report is not None:  # a gate step: every failed check, with the end of its own log
                    for ln in failure_lines(report):
                        out(f"  | {ln}")
                else:
                    for ln in step.log[-50:]:
                        out(f"  | {ln}")
            else:
                for ln in parser.tail[-50:]:
                    out(f"  | {ln}")
            reason = next((ln for ln in reversed(parser.tail) if ln.startswith("ERROR")), f"buildx exited {rc}")
            fetched = artifact_of(step, plan.variant.artifacts) if step is not None else None
            if report is not None:  # the last line of the log says which gate failed and why
                reason = f"gate step: {failures(report)}"
            elif step is not None and GATE_STEP in " ".join(step.name.split()):
                reason = "gate step: no gate report: the gate runner did not run (is the spec's `python` a Python?)"
            elif step is not None and BRIDGE_STEP in step.name:
                reason = (
                    "bridge install step: the spec's python did not report sglang-attn-bridge installed "
                    "(is the spec's `python` a CPython?)"
                )
            elif step is not None and fetched is not None:  # an artifact's fetch stage: which file, which digest
                name, record = fetched
                said = next((ln for ln in reversed(step.log) if ln.startswith("ERROR")), reason)
                reason = f"artifact {name} ({record['url']}, lock sha256:{record['sha256'][:12]}): {said}"
            elif step is not None and PUSH_STEP_RE.match(" ".join(step.name.split())):
                said = next((ln for ln in reversed(step.log) if ln.startswith("ERROR")), reason)
                raise PushFailed(f"build of {plan.name} failed: {' '.join(step.name.split())}: {said}")
            elif step is not None:
                reason = " ".join(step.name.split())
            raise BuildFailed(f"build of {plan.name} failed: {reason}")
        with open(iidfile) as f:
            image_id = f.read().strip()
        if gate_steps is not None:
            gate_steps += parser.gate_steps()
        if site.push:
            with open(metadata) as f:
                image_id = json.load(f).get("containerimage.digest") or image_id
        elif site.output(tmp):
            image_id = load_archive(site.docker, os.path.join(tmp, OCI_ARCHIVE), plan.name)
    out(f"built {plan.name} in {time.monotonic() - started:.1f}s: {image_id[:19]}")
    return image_id


def load_archive(docker_options: tuple, path: str, name: str) -> str:
    """Load a build's OCI archive into its engine (`docker load`, the builder's own `--context`); its image ID."""
    run = _bounded([docker_cmd(), *docker_options, "load", "-i", path], "docker", ("load",), IMPORT_TIMEOUT)
    said = (run.stdout + run.stderr).strip()
    found = LOADED_RE.search(said)
    if run.returncode != 0 or found is None:
        raise BuildFailed(f"build of {name}: `docker load` of its image failed: {short(said, 300, quote=False)}")
    return found.group(1)


def artifact_of(step: Step, records: dict) -> tuple | None:
    """(name, record) of the artifact whose fetch stage (toolkit/plan/artifacts.py) a BuildKit step is, or None."""
    m = re.match(r"\[(?:linux/\S+ )?(\S+) \d+/\d+\]", step.name)  # a platform first when there are several
    for name, record in records.items():
        if m and m.group(1) == artifacts.stage_name(name) and "sha256" in record:
            return name, record
    return None


def stop_child(proc, signum: int) -> None:
    """Forward `signum` to the child's process group (buildx cancels its BuildKit session on SIGINT/SIGTERM) and
    wait for it; SIGKILL after STOP_GRACE seconds. Never leaves the child running behind the caller: a second
    signal while it waits is ignored."""
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        for sig, grace in ((signum, STOP_GRACE), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        if proc.stdout:
            proc.stdout.close()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def read_container_file(container, path: str) -> bytes | None:
    """The bytes of the regular file `path` in a container, or None when it has none there."""
    import io
    import tarfile

    import docker.errors

    try:
        stream, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.getmembers()[0]
        fh = tar.extractfile(member) if member.isfile() else None
        return fh.read() if fh is not None else None


def read_image_file(client, image: str, path: str) -> bytes | None:
    """The bytes of the regular file `path` in `image` (a container is created, never started, then removed), or
    None when the image has no such file."""

    container = client.containers.create(image, entrypoint=["/nonexistent"], network_disabled=True)
    try:
        return read_container_file(container, path)
    finally:
        container.remove(force=True)


def tag_all(client, iid: str, refs) -> None:
    """Point every ref at image `iid`, or none: when one tag fails, those already moved go back where they were."""
    before: dict = {}
    moved: list = []
    for ref in refs:
        try:
            before[ref] = image_id(client, ref)
            tag(client, iid, ref)
        except Exception as e:  # the SDK's APIError, or a reference it cannot parse
            for done in moved:
                if before[done]:
                    tag(client, before[done], done)
                else:
                    client.images.remove(done, noprune=True)
            raise BuildFailed(f"tagging {ref} failed ({short(str(e), 200, quote=False)}); no tag moved") from None
        moved.append(ref)


def tag(client, image_id: str, ref: str) -> None:
    repo, _, tag_ = ref.rpartition(":")
    if not repo or "/" in tag_:
        repo, tag_ = ref, "latest"
    client.images.get(image_id).tag(repo, tag_)


def image_id(client, ref: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def push(client, ref: str, out=print) -> str:
    """Push a tag; return the registry's manifest digest. Raises BuildFailed on any error in the stream (the
    engine retries a push's own requests; a lookup after it is retried by toolkit/engine/registry.py)."""
    repo, _, tag_ = ref.rpartition(":")
    digest = None
    for msg in client.images.push(repo, tag=tag_, stream=True, decode=True):
        if "error" in msg:
            raise BuildFailed(f"push of {ref} failed: {msg['error']}")
        aux = msg.get("aux") or {}
        digest = aux.get("Digest", digest)
    if not digest:
        raise BuildFailed(f"push of {ref} returned no digest")
    out(f"pushed {ref}@{digest}")
    return digest
