"""TransformerEngine is installed as one consistent triplet, checked from metadata (importing it needs a driver).

transformer-engine, exactly one transformer-engine-cuNN core and transformer-engine-torch at the version given, the
torch extension requiring that core at that version, the package findable, and every other requirement of the torch
extension installed: what a half-replaced TransformerEngine (a base's copy under a pip one) gets wrong.
Usage: python probes/te_triplet.py VERSION
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import sys


def name_of(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ (]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def problems(version: str) -> list:
    installed = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version for d in metadata.distributions()}
    cores = sorted(n for n in installed if re.fullmatch(r"transformer-engine-cu\d+", n))
    found = []
    if len(cores) != 1:
        return [f"expected exactly one transformer-engine-cuNN core, found {cores or 'none'}"]
    for name in ("transformer-engine", cores[0], "transformer-engine-torch"):
        if installed.get(name) != version:
            found.append(f"{name} {installed.get(name, 'missing')}, expected {version}")
    requires = [
        r.lower().replace("_", "-").replace(" ", "") for r in metadata.requires("transformer-engine-torch") or []
    ]
    if f"{cores[0]}=={version}" not in requires:
        found.append(f"transformer-engine-torch does not require {cores[0]}=={version}: {requires}")
    if importlib.util.find_spec("transformer_engine") is None:
        found.append("transformer_engine is not importable (no package found)")
    needed = {name_of(r) for r in requires if "extra==" not in r and not name_of(r).startswith("transformer-engine")}
    missing = sorted(needed - set(installed))
    if missing:
        found.append(f"transformer-engine-torch's requirements not installed: {missing}")
    return found


if __name__ == "__main__":
    found = problems(sys.argv[1])
    for line in found:
        print(f"FAIL {line}")
    print("PASS TransformerEngine triplet" if not found else f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
