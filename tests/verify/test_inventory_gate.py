"""The inventory gate judges what a real interpreter sees: a fake site-packages of .dist-info folders, on the path of
a Python run without its own site-packages (`-S`), through the runner's CLI. And `--inventory-json` lists it."""

import json
import os
import subprocess
import sys

import pytest
from support import ROOT

from verify.inventory import debian_inventory, python_inventory


def dist(site, name, version, *headers):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version, *headers]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site-packages"
    dist(site, "Foo", "1.0", "License-Expression: MIT")
    dist(site, "bar_baz", "2.0", "License: BSD-3-Clause\n  the rest of a long text")
    dist(site, "qux", "0.1", "Classifier: License :: OSI Approved :: Apache Software License")
    (site / "qux-0.1.dist-info" / "direct_url.json").write_text(
        '{"url": "file:///src/qux", "dir_info": {"editable": true}}'
    )
    return site


def runner(tmp_path, site, *args, config=None):
    """`python -S -m verify ...` seeing only the standard library, the runner and `site` (and any extra folder)."""
    cmd = [sys.executable, "-S", "-m", "verify", *args]
    if config is not None:
        cfg = tmp_path / "gates.json"
        cfg.write_text(json.dumps({"inventory": config}))
        cmd += ["--config", str(cfg)]
    sites = site if isinstance(site, list) else [site]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [str(s) for s in sites]))
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


ALL = {"foo": "1.0", "bar-baz": "2.0", "qux": "0.1"}


def test_a_full_match_passes_and_counts(tmp_path, site):
    proc = runner(tmp_path, site, config={"distributions": dict(ALL, unused="9.9")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS  inventory" in proc.stdout
    assert "3 distributions, all in the lock" in proc.stdout


def test_a_distribution_outside_the_set_fails_named(tmp_path, site):
    allowed = {k: v for k, v in ALL.items() if k != "qux"}
    proc = runner(tmp_path, site, config={"distributions": allowed})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  inventory" in proc.stdout
    assert "1 distribution outside the lock: qux 0.1 (not in the lock)" in proc.stdout


def test_a_wrong_version_fails_named_with_the_locked_one(tmp_path, site):
    proc = runner(tmp_path, site, config={"distributions": dict(ALL, **{"bar-baz": "2.1"}, foo="0.9")})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 distributions outside the lock: bar-baz 2.0 (lock: 2.1), foo 1.0 (lock: 0.9)" in proc.stdout


def test_null_takes_any_version_of_a_source_tree(tmp_path, site):
    proc = runner(tmp_path, site, config={"distributions": dict(ALL, foo=None)})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_first_copy_on_the_path_is_judged_as_pip_sees_it(tmp_path, site):
    later = tmp_path / "later"
    dist(later, "foo", "0.5")
    assert runner(tmp_path, [site, later], config={"distributions": ALL}).returncode == 0
    proc = runner(tmp_path, [later, site], config={"distributions": ALL})
    assert "foo 0.5 (lock: 1.0)" in proc.stdout, proc.stdout + proc.stderr


def test_the_set_of_this_machine_is_used(tmp_path, site):
    import platform

    here, other = platform.machine(), "no-such-machine"
    ok = runner(tmp_path, site, config={"machines": {here: ALL, other: {"foo": "1.0"}}})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = runner(tmp_path, site, config={"machines": {here: {"foo": "1.0"}, other: ALL}})
    assert "2 distributions outside the lock" in wrong.stdout, wrong.stdout
    none = runner(tmp_path, site, config={"machines": {other: ALL}})
    assert none.returncode == 1 and "no set of distributions for machine %s" % here in none.stdout


@pytest.mark.parametrize(
    "config, key",
    [
        ({"distributions": {"Foo": "1.0"}}, "inventory.distributions.Foo"),
        ({"distributions": {}}, "inventory.distributions"),
        ({"distributions": {"foo": 1}}, "inventory.distributions.foo"),
        ({"distributions": ALL, "machines": {}}, "inventory"),
        ([], "inventory"),
    ],
)
def test_a_bad_set_is_bad_config(tmp_path, site, config, key):
    proc = runner(tmp_path, site, config=config)
    assert proc.returncode == 2 and "key '%s'" % key in proc.stderr, proc.stderr


def test_inventory_json_lists_distributions_with_licenses_and_debian_packages(tmp_path, site):
    proc = runner(tmp_path, site, "--inventory-json", "-")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["runner"] == "verify-inventory" and data["format"] == 1
    by_name = {d["name"]: d for d in data["python"]}
    assert set(by_name) == {"foo", "bar-baz", "qux"}
    assert (by_name["foo"]["license_field"], by_name["foo"]["licenses"]) == ("License-Expression", ["MIT"])
    assert (by_name["bar-baz"]["license_field"], by_name["bar-baz"]["licenses"]) == ("License", ["BSD-3-Clause"])
    assert by_name["qux"]["licenses"] == ["OSI Approved :: Apache Software License"]
    assert by_name["foo"]["location"] == os.path.realpath(site)
    assert by_name["foo"]["direct_url"] is None and by_name["qux"]["direct_url"] == "file:///src/qux"
    out = tmp_path / "inv.json"
    assert runner(tmp_path, site, "--inventory-json", str(out)).returncode == 0
    assert json.loads(out.read_text())["python"] == data["python"]


def test_inventory_json_is_a_mode_of_its_own(tmp_path, site):
    for extra in (["--pip-check"], ["--import", "json"], ["--json", "r.json"], ["--verbose"]):
        proc = runner(tmp_path, site, "--inventory-json", "-", *extra)
        assert proc.returncode == 2 and "runs no gate" in proc.stderr, (extra, proc.stderr)
        assert proc.stdout == ""


def test_debian_packages_are_the_installed_ones(tmp_path):
    status = tmp_path / "status"
    status.write_text(
        "Package: apt\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.6.1\nDescription: x\n more\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n\n"
        "Package: adduser\nStatus: install ok installed\nArchitecture: all\nVersion: 3.134\n"
    )
    assert debian_inventory(str(status)) == [
        {"package": "adduser", "version": "3.134", "architecture": "all"},
        {"package": "apt", "version": "2.6.1", "architecture": "amd64"},
    ]
    assert debian_inventory(str(tmp_path / "none")) is None


def test_long_license_text_falls_back_to_classifiers(tmp_path):
    site = tmp_path / "s"
    dist(site, "big", "1", "License: " + "x" * 300, "Classifier: License :: OSI Approved :: MIT License")
    assert python_inventory([str(site)])[0]["licenses"] == ["OSI Approved :: MIT License"]
