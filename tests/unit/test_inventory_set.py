"""The inventory gate's set is derived from the spec (the wheelhouse's constraints, `wheelhouse.beside`, the bridge)
and reaches gates.json; nobody writes it by hand."""

import json
import shutil

import pytest
from support import ROOT, edited_spec

from toolkit.errors import SpecError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import bridge_version
from toolkit.render.gate_bundle import config_text
from toolkit.spec import inventory
from toolkit.spec.catalog import constraint_pins, load_catalog, load_family

IMAGES = ROOT / "images"


def test_smoke_set_is_each_platforms_pins_the_bridge_and_pip():
    gate = load_catalog().resolve("smoke").gates["inventory"]
    sets = gate["machines"]
    assert set(sets) == {"x86_64", "aarch64"}
    for machine, constraints in (("x86_64", "smoke.constraints.txt"), ("aarch64", "smoke.constraints.arm64.txt")):
        pins = constraint_pins(IMAGES / constraints)
        assert pins and all(sets[machine][name] == version for name, version in pins.items()), machine
        assert sets[machine]["sglang-attn-bridge"] == bridge_version()
        assert sets[machine]["pip"] == "23.0.1"
        assert set(sets[machine]) == set(pins) | {"sglang-attn-bridge", "pip"}
    assert sets["x86_64"]["torch"] != sets["aarch64"]["torch"]  # the platforms' pins differ: one set each


def test_the_arm64_twin_gets_the_same_gate_config():
    """The gate step's nonce is blind to the target and platforms, so its config must be too."""
    catalog = load_catalog()
    assert catalog.resolve("smoke").gates["inventory"] == catalog.resolve("smoke-arm64").gates["inventory"]


def test_miles_cpu_takes_its_source_trees_at_any_version():
    allowed = load_catalog().resolve("miles-cpu").gates["inventory"]["distributions"]
    pins = constraint_pins(IMAGES / "miles-cpu.constraints.txt")
    assert {k: v for k, v in allowed.items() if k in pins} == pins
    assert {k: v for k, v in allowed.items() if k not in pins} == {
        "miles": None,
        "megatron-core": None,
        "pip": "23.0.1",
        "sglang-attn-bridge": bridge_version(),
    }


def test_families_without_a_wheelhouse_have_no_inventory_gate():
    catalog = load_catalog()
    gpu = [v for v in catalog.variants.values() if not v.wheelhouse]
    assert gpu and all("inventory" not in v.gates for v in gpu)


def test_the_set_is_in_gates_json():
    plan = make_plan(load_catalog().resolve("smoke"), revision="test")
    assert json.loads(config_text(plan.gates))["inventory"]["machines"]["x86_64"]["torch"] == "2.13.0+cpu"


def test_a_pin_dropped_from_the_constraints_leaves_the_set(tmp_path, monkeypatch):
    shutil.copy(IMAGES / "smoke.constraints.txt", tmp_path / "smoke.constraints.txt")
    text = (tmp_path / "smoke.constraints.txt").read_text()
    (tmp_path / "smoke.constraints.txt").write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("sympy=="))
    )
    wheelhouse = load_catalog().resolve("miles-cpu").wheelhouse  # one platform
    monkeypatch.setattr("toolkit.spec.catalog.IMAGES_DIR", tmp_path)
    allowed = inventory.gate_config(dict(wheelhouse, constraints="smoke.constraints.txt"))["distributions"]
    assert "sympy" not in allowed and "torch" in allowed


@pytest.mark.parametrize(
    "edit, key, words",
    [
        (lambda d: d["gates"].update(inventory={"distributions": {"torch": "2.13.0"}}), "gates.inventory", "derived"),
        (
            lambda d: d["wheelhouse"]["beside"].update(miles={"source": "miles", "why": "x"}),
            "wheelhouse.beside.miles.source",
            "no `source` step installs",
        ),
        (
            lambda d: d["wheelhouse"]["beside"].update(Pip={"version": "1", "why": "x"}),
            "wheelhouse.beside.Pip",
            "normalized name",
        ),
        (lambda d: d["wheelhouse"]["beside"]["pip"].pop("why"), "wheelhouse.beside.pip.why", "why"),
        (
            lambda d: d["wheelhouse"]["beside"]["pip"].update(source="x"),
            "wheelhouse.beside.pip",
            "exactly one of",
        ),
    ],
)
def test_the_set_is_never_written_by_hand_and_beside_is_checked(images_dir, edit, key, words):
    path = edited_spec(images_dir, "smoke", edit)
    with pytest.raises(SpecError) as err:
        load_family(path)
    assert key in str(err.value) and words in str(err.value), str(err.value)
