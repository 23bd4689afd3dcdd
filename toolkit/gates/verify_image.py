"""Run a target's gates inside an existing image (a pulled production image, say), through the docker SDK.

verify/ and the gate config are copied into a fresh container with no network; the runner runs with the image's
own python; reports are copied back; the container is always removed.
"""

from __future__ import annotations

import contextlib

from toolkit.errors import BuildFailed, UsageError, short
from toolkit.outputs import write_output
from toolkit.strict import env_flag

WORKDIR = "/tmp/miles-gates"
RUN_LABEL = "io.miles.gate-run"  # marks the throwaway container a verify run makes (it is always removed)
REQUIRE_GPU = "MILES_GATES_REQUIRE_GPU"  # verify/env_flag.py reads it in the container, by the same rule
GPU_GATES = ("gpu_imports", "gpu_commands")


def gpu_required() -> bool:
    """MILES_GATES_REQUIRE_GPU of this host, read strictly (toolkit/strict.py): a GPU gate that finds no driver
    fails rather than reports `not run`."""
    return env_flag(REQUIRE_GPU)


def check_build_gates(variant) -> None:
    """A build's gate step runs in BuildKit, which gives it no GPU: with MILES_GATES_REQUIRE_GPU true, a variant
    with GPU gates could only fail there, after the whole build. Refused first (exit 2), naming the variable."""
    if gpu_required() and any(variant.gates.get(key) for key in GPU_GATES):
        raise UsageError(
            f"{REQUIRE_GPU} is true, but a build's gate step has no GPU, so the GPU gates of {variant.name} can only "
            "fail there: build without it, then run `build.py verify` on a GPU host"
        )


def _gates_tar(gates: dict) -> bytes:
    """miles-gates/verify/, miles-gates/probes/ and miles-gates/gates.json."""
    from toolkit.render.gate_bundle import config_text, payload_bytes, tar_of

    files = {f"miles-gates/{name}": data for name, data in payload_bytes().items()}
    files["miles-gates/gates.json"] = config_text(gates).encode()
    return tar_of(files)


def _read_back(container, path: str) -> bytes | None:
    from toolkit.engine.docker_engine import read_container_file

    return read_container_file(container, path)


def by_platform(client, image: str, platform: str | None = None) -> list:
    """[(platform, ref)] to verify. An image present on this engine is verified as it is. Otherwise it is read
    from its registry: a manifest list gives one by-digest reference per platform (each pulled for its
    platform: under binfmt emulation where the engine's machine is another), a single image gives itself."""
    import docker.errors

    from toolkit.engine.local_images import platforms_of
    from toolkit.engine.registry import names_registry, repository_of

    local_platform = None
    try:
        local = client.images.get(image)
        local_platform = f"{local.attrs.get('Os')}/{local.attrs.get('Architecture')}"
        if platform in (None, local_platform):
            return [(platform, image)]
    except docker.errors.ImageNotFound:
        pass
    if not (names_registry(image) or "@" in image):  # a local name: no registry is asked (Docker Hub least)
        if local_platform is not None:
            raise UsageError(f"image {image} is {local_platform} on this engine, not {platform}")
        raise UsageError(f"image {image} is not present on this engine (pull or load it first)")
    repo = repository_of(image.split("@", 1)[0])
    listed = platforms_of(image)
    if listed and platform is not None and platform not in listed:
        raise UsageError(f"{image} holds no {platform} image (it holds: {', '.join(listed)})")
    refs = [(p, f"{repo}@{digest}") for p, digest in sorted(listed.items()) if platform in (None, p)]
    for p, ref in refs or [(platform, image)]:  # no list: one image, pulled as it is
        try:
            pulled = client.images.pull(ref, platform=p if listed else None)
        except docker.errors.APIError as e:
            reason = short(str(e.explanation or e), 200, quote=False)
            raise UsageError(f"image {ref} is not present on this engine and cannot be pulled ({reason})") from None
        held = f"{pulled.attrs.get('Os')}/{pulled.attrs.get('Architecture')}"
        if p is not None and held != p:
            raise UsageError(f"{ref} is a {held} image, not {p}")
    return refs or [(platform, image)]


def report_named(line: str, json_path) -> str:
    """A runner's line as this host reads it: the summary names the JSON report where it is kept here (`--json`),
    not the container's copy, which goes with the container."""
    import os

    kept = os.path.abspath(json_path) if json_path else "not kept (--json FILE keeps it)"
    return line.replace(f"; report: {WORKDIR}/report.json", f"; report: {kept}")


@contextlib.contextmanager
def runner_container(client, variant, image: str, args: list, what: str, environment=None):
    """A started throwaway container of `image` that runs the target's python on the runner (`-m verify ARGS`,
    delivered with the gate config in WORKDIR): no network, root, labelled RUN_LABEL, removed however the block
    ends. `what` starts the one-line errors (`verify smoke`, `sbom smoke`)."""
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise UsageError(f"image {image} is not present on this engine (pull or load it first)") from None
    container = client.containers.create(
        image,
        command=["-m", "verify", *args],
        entrypoint=[variant.python],
        environment=environment or {},
        working_dir=WORKDIR,
        network_disabled=True,
        user="0",
        labels={RUN_LABEL: variant.name},
    )
    try:
        container.put_archive("/tmp", _gates_tar(variant.gates))
        try:
            container.start()
        except docker.errors.APIError as e:  # the engine could not run the target's python in this image
            reason = short(str(e.explanation or e), 200, quote=False)
            raise BuildFailed(
                f"{what} on {image}: cannot run {variant.python}, the target's python ({reason})"
            ) from None
        yield container
    finally:
        container.remove(force=True)


def verify_image(client, variant, image: str, json_path=None, junit_path=None, out=print, verbose=False) -> int:
    """Return 0 when every gate passed, 1 otherwise (the runner's own exit code 2 means bad config: raised).
    `verbose`: the runner also lists every allowed pip-check line with its rule and reason."""
    import secrets

    from toolkit.gates.report import report_problem

    nonce = secrets.token_hex(16)  # this run's: a report without it is not this run's
    args = ["--config", "gates.json", "--nonce", nonce, "--json", "report.json", "--junit", "report.xml"]
    args += ["--verbose"] if verbose else []
    env = {REQUIRE_GPU: "1" if gpu_required() else "0"}  # the runner judges GPU gates as asked here
    with runner_container(client, variant, image, args, f"verify {variant.name}", env) as container:
        rc = container.wait(timeout=1800).get("StatusCode", 1)
        for line in container.logs(stdout=True, stderr=True).decode(errors="replace").splitlines():
            out(report_named(line, json_path))
        kept = _read_back(container, f"{WORKDIR}/report.json")
        for dest, name in ((json_path, "report.json"), (junit_path, "report.xml")):
            if dest:
                data = _read_back(container, f"{WORKDIR}/{name}")
                if data is None:
                    raise BuildFailed(f"the gate runner wrote no {name} (exit {rc})")
                write_output(dest, data)
    if rc == 2:
        raise UsageError(f"the gate runner rejected the gate config of {variant.name} (see above)")
    report = _report_of(kept)
    problem = report_problem(report, nonce, variant.gates)
    if problem is not None and (rc == 0 or report is None or "nonce" not in report):
        out(f"verify {variant.name} on {image}: {problem}")
        return 1
    return 0 if rc == 0 else 1


def _report_of(data: bytes | None) -> dict | None:
    import json

    if data is None:
        return None
    try:
        report = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    return report if isinstance(report, dict) else None
