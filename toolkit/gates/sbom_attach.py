"""The SBOM goes with every pushed image: after a push, each platform's image is described (toolkit/gates/sbom.py)
and the document attached to that platform's manifest in the registry as an OCI referrer, with `oras attach`
(the referrers API where the registry has one, else its tag fallback, `sha256-<digest>`, which Debian's
docker-registry 2.8 gets). `oras discover` lists it and `oras pull` reads it back, by the image's digest.

A platform's image that is not in this engine (a builder pushed it straight to the registry) is pulled here by its
manifest digest first, and stays (removing an image pulled by digest and pulling it again left the engine unable to
find it by that digest: a later `build.py verify` of the list failed so). The document is dated with the image's
own build clock (`SOURCE_DATE_EPOCH`, its `created` time), never this host's.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from toolkit.engine import registry
from toolkit.errors import BuildFailed, UsageError, short

ARTIFACT_TYPE = "application/vnd.cyclonedx+json"
ORAS_TIMEOUT = 600  # seconds one oras call may take (an upload of a few MB)


def oras_cmd() -> str:
    """The oras binary, or exit 2 before anything is built or pushed (a push must carry its SBOM)."""
    found = shutil.which("oras")
    if found is None:
        raise UsageError("oras is not installed: a push attaches the image's SBOM with it (ci/setup.sh installs it)")
    return found


def plain_http(ref: str) -> list[str]:
    """`--plain-http` for a registry on a loopback address, as the engine treats 127.0.0.0/8 as insecure."""
    host = registry.registry_host(ref).rsplit(":", 1)[0].strip("[]")
    try:
        return ["--plain-http"] if host == "localhost" or ipaddress.ip_address(host).is_loopback else []
    except ValueError:
        return []


def _oras(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([oras_cmd(), *args], capture_output=True, text=True, timeout=ORAS_TIMEOUT, cwd=cwd)
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())
        raise BuildFailed(f"oras {args[0]} of {args[-1]} failed: {short(said, 300, quote=False)}")
    return proc


def attach(subject: str, text: str, created: str) -> str:
    """Attach the SBOM `text` to `subject` (REPOSITORY@DIGEST); return the referrer manifest's digest."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sbom.cdx.json").write_text(text, encoding="utf-8")
        args = ["attach", *plain_http(subject), "--artifact-type", ARTIFACT_TYPE, "--format", "json"]
        args += ["--annotation", f"org.opencontainers.image.created={created}"]
        proc = _oras(*args, subject, f"sbom.cdx.json:{ARTIFACT_TYPE}", cwd=tmp)  # the file by a plain relative name
    return json.loads(proc.stdout)["digest"]


def attached(subject: str) -> list[str]:
    """The digests of the SBOMs attached to `subject` (REPOSITORY@DIGEST), from `oras discover`."""
    proc = _oras("discover", *plain_http(subject), "--artifact-type", ARTIFACT_TYPE, "--format", "json", subject)
    return [m["digest"] for m in json.loads(proc.stdout).get("manifests") or []]


def attach_to_pushed(client, variant, pushed: dict, out=print) -> dict:
    """Describe each platform's image of a push ({repository: digest}; a manifest list: each platform's manifest,
    one image: itself) once, and attach the document in every repository it went to; {subject: referrer digest}.
    An image pulled here to be described stays, by its digest, as `build.py verify` leaves what it pulls."""
    import docker.errors

    from toolkit.engine.local_images import platforms_of
    from toolkit.gates.sbom import image_sbom

    oras_cmd()
    made: dict = {}
    first, digest = next(iter(pushed.items()))
    for platform, manifest in sorted((platforms_of(f"{first}@{digest}") or {"": digest}).items()):
        local = f"{first}@{manifest}"
        try:
            client.images.get(local)
        except docker.errors.ImageNotFound:
            client.images.pull(first, tag=manifest, platform=platform or None)
        text = image_sbom(client, variant, local)
        created = client.images.get(local).attrs["Created"]
        for repository in pushed:
            subject = f"{repository}@{manifest}"
            made[subject] = attach(subject, text, created)
            on = f" ({platform})" if platform else ""
            out(f"sbom: {subject}{on}: attached {made[subject]} ({ARTIFACT_TYPE})")
    return made
