"""Which BuildKit builder runs a build, and what it can do.

A builder is anything `docker buildx` accepts as `--builder`: a buildx builder (docker-container, remote or
kubernetes driver) or a docker context (the `docker` driver: the engine's built-in BuildKit). What it can do
decides the build's shape, before anything runs:

- `docker` driver, classic image store (the default engine here): one platform per build, the image lands in that
  engine (tags move there), registry cache can be imported but not exported.
- `docker` driver, containerd image store: also several platforms at once and cache export; an image it keeps
  comes back as an OCI archive with its file times rewritten to SOURCE_DATE_EPOCH, so its digest reproduces.
- any other driver: several platforms and cache export; the image exists only where it is pushed.

Asking a builder for what it cannot do is bad usage (exit 2), said in one line naming the builder and the reason.
That includes compiling kernels for a platform the builder runs only under emulation (QEMU through binfmt_misc):
`docker buildx inspect` lists each node's platforms, the node's own first, then those it can only emulate; the
default engine's own platform is its architecture (`docker info`).
"""

from __future__ import annotations

import platform as host
import re
from dataclasses import dataclass

from toolkit.engine import docker_engine as engine
from toolkit.errors import UsageError, short

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CONTAINERD_STORE = "io.containerd.snapshotter.v1"  # `docker info`'s driver-type when the engine uses containerd
# A machine's architecture (`docker info`, `uname -m`) as an OCI platform's, and what such a CPU also runs natively.
ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}
ALSO_NATIVE = {"amd64": ("386",), "arm64": ("arm",)}


@dataclass(frozen=True)
class Builder:
    name: str | None  # None: buildx's default (the engine DOCKER_HOST points at)
    driver: str
    host: str | None = None  # docker driver: the engine's API address (None: DOCKER_HOST)
    containerd_store: bool = False
    native: tuple = ()  # "os/arch" of what its nodes run without emulation (empty: not known)

    @property
    def label(self) -> str:
        return self.name or "default"

    @property
    def engine_local(self) -> bool:
        """The built image lands in an engine's image store, where the SDK can tag and push it."""
        return self.driver == "docker"

    @property
    def multi_platform(self) -> bool:
        return self.driver != "docker" or self.containerd_store

    @property
    def cache_export(self) -> bool:
        return self.driver != "docker" or self.containerd_store

    @property
    def attestations(self) -> bool:
        """It can attach BuildKit attestations (provenance) to what it pushes: not the classic image store."""
        return self.driver != "docker" or self.containerd_store

    @property
    def rewrites_timestamps(self) -> bool:
        """Its image can come back with file times rewritten to SOURCE_DATE_EPOCH, as an OCI archive the engine
        loads: the docker driver on the containerd image store (the classic store ignores rewrite-timestamp)."""
        return self.driver == "docker" and self.containerd_store

    def docker_args(self) -> list:
        """Global docker options: buildx runs a docker context's builder only as the current context."""
        return ["--context", self.name] if self.name and self.driver == "docker" else []

    def args(self) -> list:
        return ["--builder", self.name] if self.name and self.driver != "docker" else []

    def client(self):
        """A docker SDK client for the engine of a docker-driver builder."""
        return engine.connect(self.host)


def native_of(arch: str, os_name: str = "linux") -> tuple:
    """The platforms ("os/arch") a machine of this architecture runs natively; empty when the name is unknown."""
    a = ARCH.get(arch, arch if arch in ARCH.values() else "")
    return tuple(f"{os_name}/{x}" for x in ((a, *ALSO_NATIVE.get(a, ())) if a else ()))


def native_platforms(inspect_text: str) -> tuple:
    """From `docker buildx inspect`: per node, its first listed platform is its own (BuildKit lists the worker's
    native platforms first, emulated ones after); the builder runs natively what any node runs natively."""
    native: list = []
    for line in inspect_text.splitlines():
        if not line.startswith("Platforms:"):
            continue
        listed = [p.strip().rstrip("*") for p in line.split(":", 1)[1].split(",") if p.strip()]
        if listed:
            os_name, _, rest = listed[0].partition("/")
            native += [p for p in native_of(rest.split("/")[0], os_name) if p not in native]
    return tuple(native)


def _context_host(name: str) -> str | None:
    run = engine.docker("context", "inspect", name, "--format", "{{.Endpoints.docker.Host}}")
    return run.stdout.strip() or None if run.returncode == 0 else None


def resolve(name: str | None, client=None) -> Builder:
    """The builder `name` names (None: the default engine, `client` when the caller holds one), with its driver and
    image store, else exit 2/3."""
    if name is not None and not NAME_RE.fullmatch(name):
        raise UsageError(f"--builder {short(name)}: not a builder name (letters, digits, '._-')")
    if name is None:
        store, native = _engine_facts(client or engine.connect())
        return Builder(None, "docker", None, store, native)
    run = engine.buildx("inspect", name)
    if run.returncode != 0:
        raise UsageError(f"--builder {short(name)}: no such buildx builder or docker context (`docker buildx ls`)")
    driver = next((ln.split(":", 1)[1].strip() for ln in run.stdout.splitlines() if ln.startswith("Driver:")), "")
    native = native_platforms(run.stdout)
    if driver != "docker":
        return Builder(name, driver or "unknown", native=native)
    host = _context_host(name)
    store, engine_native = _engine_facts(engine.connect(host))
    return Builder(name, "docker", host, store, native or engine_native)


def _engine_facts(client) -> tuple:
    """(containerd image store?, native platforms) of an engine, from one `docker info`."""
    info = client.info()
    status = dict(tuple(pair) for pair in info.get("DriverStatus") or [] if len(pair) == 2)
    return status.get("driver-type") == CONTAINERD_STORE, native_of(str(info.get("Architecture") or ""))


def this_machine() -> tuple:
    """What this machine runs natively: the builder a bake file names none for is assumed to be its engine."""
    return native_of(host.machine())


def emulation_problem(variant: str, compiling: list, platforms, native, builder: str) -> str | None:
    """The refusal line when `variant` compiles kernels (`compiling`: its compiling steps, by name) for a platform
    outside `native` (what `builder` runs without emulation; empty: not known, nothing refused), else None."""
    if not compiling or not native:
        return None
    os_arch = ["/".join(p.split("/")[:2]) for p in platforms]
    emulated = [p for p, key in zip(platforms, os_arch) if key not in native]
    if not emulated:
        return None
    steps = ", ".join(compiling[:3]) + (f" and {len(compiling) - 3} more" if len(compiling) > 3 else "")
    return (
        f"{variant} compiles kernels ({steps}) for {emulated[0]}, which builder {builder} only emulates (native: "
        f"{', '.join(native)}); name a builder that runs {emulated[0]} natively with --builder NAME, "
        "or pass --allow-emulation"
    )


def check_emulation(builder: Builder | None, variant, allow: bool) -> None:
    """Refuse (exit 2) a build whose kernel compiles would run under emulation, unless `allow`."""
    from toolkit.steps import compiling_steps

    if allow:
        return
    native = builder.native if builder is not None else this_machine()
    label = builder.label if builder is not None else "(this machine's, as no --builder is named)"
    problem = emulation_problem(variant.name, compiling_steps(variant), variant.platforms, native, label)
    if problem:
        raise UsageError(problem)


def check(builder: Builder, platforms, push: bool, cache_export: bool) -> None:
    """Refuse (exit 2) what `builder` cannot do, before anything is built."""
    where = f"builder {builder.label} ({builder.driver} driver{', classic image store' * (not builder.multi_platform)})"
    if len(platforms) > 1 and not builder.multi_platform:
        raise UsageError(
            f"{where} builds one platform at a time; {','.join(platforms)} needs the containerd image store "
            "or another driver (docs/remote-buildkit.md)"
        )
    if cache_export and not builder.cache_export:
        raise UsageError(f"{where} cannot export cache; use --cache-from to import only, or another builder")
    if not push and pushes_itself(builder, platforms):
        what = "an image of several platforms" if len(platforms) > 1 else f"an image built by {where}"
        raise UsageError(f"{what} exists only in a registry: add --push (with --registry)")


def pushes_itself(builder: Builder, platforms) -> bool:
    """The image goes from the builder straight to the registry (it can land in no engine's image store)."""
    return len(platforms) > 1 or not builder.engine_local


def site(builder: Builder | None, plan, contexts: tuple, cache: str | None, cache_from: str | None) -> engine.BuildSite:
    """Where a build of `plan` runs, as buildx arguments (engine.BuildSite) for this builder (None: a bake file's,
    chosen when it runs): `--builder`, named contexts, registry cache (one ref per target)."""
    from toolkit.engine.bake import cache_refs

    ref = cache or cache_from
    pulls, pushes = cache_refs(ref, plan.variant) if ref else ([], [])
    return engine.BuildSite(
        docker=tuple(builder.docker_args()) if builder else (),
        builder=tuple(builder.args()) if builder else (),
        contexts=contexts,
        cache_from=tuple(pulls),
        cache_to=tuple(pushes) if cache else (),
        attest=builder.attestations if builder else False,
        oci=builder.rewrites_timestamps if builder else False,
    )
