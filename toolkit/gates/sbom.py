"""`build.py sbom`: a CycloneDX 1.6 SBOM of an image, from what the image itself says it holds.

The gate runner's inventory mode (`python -m verify --inventory-json -`, verify/inventory.py) runs inside the
image with the target's python, delivered as `build.py verify` delivers the runner (a throwaway container with no
network, always removed); its JSON is turned into the SBOM here by the maintained library (cyclonedx-python-lib).
`sbom_json` is the pure part: inventory in, CycloneDX JSON text out.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.errors import BuildFailed, UsageError, short

SPEC_VERSION = "1.6"
INVENTORY_TIMEOUT = 600  # seconds the runner's inventory may take in the container (it reads metadata files only)


def _version_key(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def wheel_hashes(folder: Path | None) -> dict[tuple[str, str], str]:
    """{(normalized name, normalized version): sha256} of every wheel file in `folder` (a family's wheelhouse);
    empty when there is none."""
    import hashlib

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    out: dict[tuple[str, str], str] = {}
    if folder is None or not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.whl")):
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        out[(str(name), str(version))] = digest.hexdigest()
    return out


def _licenses(entry: dict) -> list:
    """The component's licenses: an SPDX expression as one expression, else each license by id or name."""
    from cyclonedx.contrib.license.factories import LicenseFactory

    values = [v for v in entry.get("licenses") or [] if isinstance(v, str) and v.strip()]
    if not values:
        return []
    factory = LicenseFactory()
    if entry.get("license_field") in ("License-Expression", "License"):  # an SPDX id or expression, else a name
        return [factory.make_from_string(values[0])]
    return [factory.make_with_name(v) for v in values]  # the `License ::` classifiers, each by its name


def sbom_json(inventory: dict, image: str, input_hash: str | None, wheels: dict[tuple[str, str], str]) -> str:
    """The CycloneDX 1.6 JSON document of `inventory` (verify/inventory.py's JSON): one component per Python
    distribution (purl pkg:pypi/NAME@VERSION, its license where the metadata gives one, the sha256 of its wheel
    where `wheels` has the file) and per installed Debian package (purl pkg:deb/debian/NAME@VERSION?arch=ARCH);
    the metadata component is the image: its reference and its input hash."""
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom()
    props = [Property(name="io.miles.input-hash", value=input_hash)] if input_hash else []
    root = Component(
        name=image,
        version=input_hash or None,
        type=ComponentType.CONTAINER,
        bom_ref=f"image:{image}",
        properties=props,
    )
    bom.metadata.component = root
    components = []
    for entry in inventory.get("python") or []:
        name, version = entry["name"], entry["version"]
        purl = PackageURL(type="pypi", name=name, version=version)
        sha = wheels.get((name, _version_key(version)))
        components.append(
            Component(
                name=name,
                version=version,
                type=ComponentType.LIBRARY,
                purl=purl,
                bom_ref=purl.to_string(),
                licenses=_licenses(entry),
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha)] if sha else [],
                properties=[
                    Property(name=f"io.miles.{key.replace('_', '-')}", value=entry[key])
                    for key in ("location", "direct_url")
                    if isinstance(entry.get(key), str) and entry[key]
                ],
            )
        )
    for pkg in inventory.get("debian") or []:
        qualifiers = {"arch": pkg["architecture"]} if pkg.get("architecture") else None
        purl = PackageURL(
            type="deb", namespace="debian", name=pkg["package"], version=pkg["version"], qualifiers=qualifiers
        )
        components.append(
            Component(
                name=pkg["package"],
                version=pkg["version"],
                type=ComponentType.LIBRARY,
                purl=purl,
                bom_ref=purl.to_string(),
            )
        )
    bom.components.update(components)
    bom.register_dependency(root, components)
    return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"


def inventory_problem(data: object) -> str | None:
    """Why `data` is not the runner's inventory (verify/inventory.py), or None."""
    if not isinstance(data, dict) or data.get("runner") != "verify-inventory" or data.get("format") != 1:
        return "is not the gate runner's inventory (format 1)"
    if not isinstance(data.get("python"), list) or not all(
        isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("version"), str)
        for d in data["python"]
    ):
        return "has no list of Python distributions"
    debian = data.get("debian")
    if debian is not None and not (
        isinstance(debian, list)
        and all(isinstance(p, dict) and all(isinstance(p.get(k), str) for k in ("package", "version")) for p in debian)
    ):
        return "has a Debian list of the wrong shape"
    return None


def read_inventory(client, variant, image: str) -> dict:
    """The runner's inventory of `image`, run with the target's python in a throwaway container (no network,
    always removed), the runner delivered as `build.py verify` delivers it."""
    from toolkit.gates.verify_image import runner_container

    with runner_container(client, variant, image, ["--inventory-json", "-"], f"sbom {variant.name}") as container:
        rc = container.wait(timeout=INVENTORY_TIMEOUT).get("StatusCode", 1)
        stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
    if rc != 0:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BuildFailed(f"sbom {variant.name} on {image}: the inventory failed (exit {rc}): {short(last, 200)}")
    try:
        data = json.loads(stdout)
    except ValueError:
        data = None
    problem = inventory_problem(data)
    if problem is not None:
        raise BuildFailed(f"sbom {variant.name} on {image}: what the runner wrote {problem}")
    assert isinstance(data, dict)
    return data


def image_sbom(client, variant, image: str) -> str:
    """The SBOM text of `image` as `variant` built it: the inventory, the image's input hash label, and the hashes
    of the family's wheelhouse files where this host has that wheelhouse (for the image's platform)."""
    import docker.errors

    from toolkit.plan.wheelhouse import folder
    from toolkit.render.context import INPUT_HASH_LABEL

    try:
        attrs = client.images.get(image).attrs
    except docker.errors.ImageNotFound:
        raise UsageError(f"image {image} is not present on this engine (pull or load it first)") from None
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    platform = f"{attrs.get('Os')}/{attrs.get('Architecture')}"
    inventory = read_inventory(client, variant, image)
    wheels = wheel_hashes(folder(variant, platform)) if variant.wheelhouse else {}
    return sbom_json(inventory, image, labels.get(INPUT_HASH_LABEL), wheels)
