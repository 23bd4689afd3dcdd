"""The inventory gate's closed set, derived from the spec: nobody lists it by hand.

A family with a wheelhouse installs its Python packages from exactly its constraints file's pins (the family's
closed pin set, `toolkit/plan/wheelhouse.py`). What else its image's Python holds is said once in the spec, under
`wheelhouse.beside`, each with its reason: a distribution at a fixed version (the venv's own pip), or one a
`source` step builds from a git component's tree (`source: COMPONENT`: any version, the tree's; the input hash
covers the tree). The bridge comes at its version (`toolkit/render/dockerfile.py: bridge_version`). The set goes
into the gate config as `inventory` (`verify/kinds/inventory.py`), so it lands in `gates.json` and runs in the build's
gate step. A family without a wheelhouse constraints file (the GPU families) gets no inventory gate.
"""

from __future__ import annotations

from toolkit.errors import SpecError, short

BRIDGE_DISTRIBUTION = "sglang-attn-bridge"  # bridge/pyproject.toml's name (the bridge install step checks it)
KEY = "inventory"


def check_beside(wheelhouse: dict, steps, file: str) -> None:
    """Each `wheelhouse.beside` entry: a normalized name, a `why`, and exactly one of `version` (fixed) or `source`
    (a git component a `source` step of the family installs)."""
    from packaging.utils import canonicalize_name

    installed_trees = {s["value"] for s in steps if s.get("kind") == "source" and s.get("install", True) is not False}
    for name, entry in (wheelhouse.get("beside") or {}).items():
        key = f"wheelhouse.beside.{short(name, 60, quote=False)}"
        if canonicalize_name(name) != name:
            raise SpecError(file, key, f"write the normalized name (PEP 503): {canonicalize_name(name)}")
        if not (entry.get("why") or "").strip():
            raise SpecError(file, f"{key}.why", "say why the image holds it (a non-empty `why`)")
        if ("version" in entry) == ("source" in entry):
            raise SpecError(file, key, "give exactly one of `version` (fixed) or `source` (a git component's tree)")
        if "source" in entry and entry["source"] not in installed_trees:
            raise SpecError(
                file,
                f"{key}.source",
                f"no `source` step installs component {short(entry['source'])}: name one that does",
            )
        if "version" in entry and not str(entry["version"]).strip():
            raise SpecError(file, f"{key}.version", "must not be empty")


def allowed_sets(variant_wheelhouse: dict) -> dict[str, dict[str, str | None]] | None:
    """{machine: {name: version or None}} for every platform the wheelhouse has wheels for, or None (no closed
    set: no constraints file)."""
    from toolkit.render.dockerfile import bridge_version
    from toolkit.spec.catalog import IMAGES_DIR, constraint_pins
    from toolkit.spec.values import PLATFORM_MACHINES

    w = variant_wheelhouse
    if not w or not w.get("constraints"):
        return None
    beside = {name: (e.get("version") if "version" in e else None) for name, e in (w.get("beside") or {}).items()}
    recipes = [(w["platform"], w["constraints"])]
    recipes += [
        (o["platform"], o.get("constraints", w["constraints"])) for o in (w.get("other_platforms") or {}).values()
    ]
    sets: dict[str, dict[str, str | None]] = {}
    for tag, constraints in recipes:
        machine = next((m for m in PLATFORM_MACHINES.values() if tag.endswith("_" + m)), tag.rpartition("_")[2])
        pins: dict[str, str | None] = dict(constraint_pins(IMAGES_DIR / constraints))
        sets[machine] = dict(sorted({**pins, **beside, BRIDGE_DISTRIBUTION: bridge_version()}.items()))
    return sets


def gate_config(variant_wheelhouse: dict) -> dict | None:
    """The `inventory` gate's config value, or None (no gate): one set, or one per machine when the family has
    wheels for several platforms (the gate step runs the same `gates.json` on each)."""
    sets = allowed_sets(variant_wheelhouse)
    if sets is None:
        return None
    if len(sets) == 1:
        return {"distributions": next(iter(sets.values()))}
    return {"machines": sets}
