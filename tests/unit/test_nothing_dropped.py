"""Nothing a spec or `--set` declares is silently dropped: for every target, one extra pip pin, one extra git
component and one extra env value either show up in the rendered Dockerfile or are refused with one line (exit 2)
naming the key. A pin or component no step installs is refused; an env value is always rendered."""

from __future__ import annotations

import pytest

from toolkit.errors import ToolkitError
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def rendered(name, sets):
    return render(make_plan(CATALOG.variants[name], sets=sets, revision="test"))


@pytest.mark.parametrize("name", sorted(CATALOG.variants))
def test_an_extra_env_value_is_rendered(name):
    assert 'EXTRA_ENV_VALUE="present"' in rendered(name, ["env.EXTRA_ENV_VALUE=present"])


@pytest.mark.parametrize("name", sorted(CATALOG.variants))
@pytest.mark.parametrize(
    "sets, key",
    [
        (["pip.extra-pin=1.0"], "pip.extra-pin"),
        (
            ["components.extra.git=https://example.com/o/extra.git", f"components.extra.ref={COMMIT}"],
            "components.extra",
        ),
    ],
)
def test_an_extra_pin_or_component_without_a_step_is_refused(name, sets, key):
    with pytest.raises(ToolkitError) as err:
        rendered(name, sets)
    line = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in line
    assert f"{key}: no step installs it" in line, line


@pytest.mark.parametrize("name", sorted(CATALOG.variants))
def test_a_new_version_of_a_declared_pin_is_rendered(name):
    pin = sorted(p for p in CATALOG.variants[name].pip if "$" not in p)[0]
    if CATALOG.variants[name].wheelhouse.get("other_platforms"):  # versions live in each platform's constraints
        with pytest.raises(ToolkitError) as err:
            rendered(name, [f"pip.{pin}=99.0.1"])
        assert err.value.exit_code == 2 and f"pip.{pin}: 99.0.1 is not what" in str(err.value)
        return
    text = rendered(name, [f"pip.{pin}=99.0.1"])
    assert f"{pin.split('[')[0]}" in text and "==99.0.1" in text
