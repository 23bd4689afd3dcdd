"""What an image holds: every Python distribution its python sees, and every Debian package dpkg says is installed.

Read by the ``inventory`` gate kind (``verify/kinds/inventory.py``: the distributions against the family's closed
set) and by ``python -m verify --inventory-json FILE|-`` (the whole inventory as JSON, which ``build.py sbom`` turns
into a CycloneDX SBOM on the host). Nothing here imports a distribution: only metadata files are read.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

DPKG_STATUS = "/var/lib/dpkg/status"
FORMAT = 1
LICENSE_MAX = 100  # a License field longer than this (on its first line) is a license text, not a name
_CLASSIFIER = "License :: "


def canonical(name: str) -> str:
    """PEP 503 normalization: what pip compares distribution names by."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(path: Optional[List[str]] = None) -> List[Any]:
    """The installed distributions as pip sees them: in sys.path order (``path`` instead, for a test), the first
    of each normalized name (a later copy is shadowed), none without a name."""
    seen: Dict[str, Any] = {}
    found: Iterable[Any] = (
        importlib.metadata.distributions() if path is None else importlib.metadata.distributions(path=path)
    )
    for dist in found:
        name = dist.metadata.get("Name")
        if not name:
            continue
        seen.setdefault(canonical(name), dist)
    return [seen[key] for key in sorted(seen)]


def name_version(dist: Any) -> Tuple[str, str]:
    """(normalized name, version) of a distribution."""
    return canonical(dist.metadata.get("Name")), str(dist.metadata.get("Version") or "")


def license_of(dist: Any) -> Tuple[Optional[str], List[str]]:
    """(the metadata field it comes from, its values): License-Expression, else License (its first line, when it is
    short enough to be a name), else the ``License ::`` classifiers (the part after ``License :: ``); (None, [])."""
    meta = dist.metadata
    expression = (meta.get("License-Expression") or "").strip()
    if expression:
        return "License-Expression", [expression]
    text = (meta.get("License") or "").strip()
    first = text.splitlines()[0].strip() if text else ""
    if first and first.upper() != "UNKNOWN" and len(first) <= LICENSE_MAX:
        return "License", [first]
    classifiers = [c[len(_CLASSIFIER) :].strip() for c in meta.get_all("Classifier") or [] if c.startswith(_CLASSIFIER)]
    classifiers = [c for c in classifiers if c]
    if classifiers:
        return "Classifier", classifiers
    return None, []


def direct_url(dist: Any) -> Optional[str]:
    """Where pip installed the distribution from, when not from an index (PEP 610's ``direct_url.json``: a local tree,
    editable or not, a git URL, a wheel file), else None."""
    try:
        data = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return url if isinstance(url, str) and url else None


def python_inventory(path: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    out = []
    for dist in distributions(path):
        name, version = name_version(dist)
        field, licenses = license_of(dist)
        out.append(
            {
                "name": name,
                "metadata_name": dist.metadata.get("Name"),
                "version": version,
                "license_field": field,
                "licenses": licenses,
                "location": os.path.realpath(str(dist.locate_file(""))),
                "direct_url": direct_url(dist),
            }
        )
    return out


def debian_inventory(status: str = DPKG_STATUS) -> Optional[List[Dict[str, str]]]:
    """Every package of dpkg's status file whose Status is ``install ok installed`` (Package, Version,
    Architecture), sorted; None when the file does not exist (an image without dpkg)."""
    try:
        with open(status, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    packages = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: Dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # a continuation line of a multi-line field
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if fields.get("Package") and fields.get("Status", "").split()[-1:] == ["installed"]:
            packages.append(
                {
                    "package": fields["Package"],
                    "version": fields.get("Version", ""),
                    "architecture": fields.get("Architecture", ""),
                }
            )
    return sorted(packages, key=lambda p: (p["package"], p["architecture"]))


def inventory(path: Optional[List[str]] = None, status: str = DPKG_STATUS) -> Dict[str, Any]:
    """The whole inventory, as ``--inventory-json`` writes it."""
    from .report import interpreter

    return {
        "runner": "verify-inventory",
        "format": FORMAT,
        "interpreter": interpreter(),
        "python": python_inventory(path),
        "debian": debian_inventory(status),
    }


def write_inventory(dest: str) -> None:
    """``dest``: a file, or ``-`` for stdout (one line)."""
    text = json.dumps(inventory(), sort_keys=True, separators=(",", ":")) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(text)
