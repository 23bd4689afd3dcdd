"""Provenance judges the real package, not a namespace portion. megatron-energon installs a ``megatron/`` folder
(``megatron/energon/``) into site-packages beside the Megatron-LM checkout, whose top ``megatron/`` has no
``__init__.py`` either: ``find_spec("megatron")`` is a namespace package of both, and its first portion is
site-packages. The gate names the module to locate (``megatron.core``) and judges where that resolves."""

from __future__ import annotations

import os

import pytest

from verify.config import ConfigError, from_dict


@pytest.fixture
def two_portions(tmp_path, write_tree):
    site = write_tree(tmp_path / "site", {"megatron/energon/__init__.py": ""})  # first on the path, as site-packages
    checkout = write_tree(
        tmp_path / "Megatron-LM", {"megatron/core/__init__.py": "", "megatron/training/__init__.py": ""}
    )
    return site, checkout


def test_the_checkout_that_provides_megatron_core_passes(two_portions, run_verify, lines):
    site, checkout = two_portions
    proc = run_verify("--provenance", "megatron.core=%s" % checkout, pythonpath=[site, checkout])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (ok,) = lines(proc, "PASS", "provenance")
    assert os.path.realpath(checkout / "megatron" / "core") in ok


def test_it_fails_when_only_site_packages_has_megatron_core(two_portions, run_verify, write_tree, lines):
    site, checkout = two_portions
    write_tree(site, {"megatron/core/__init__.py": ""})  # a second Megatron core, first on the path
    proc = run_verify("--provenance", "megatron.core=%s" % checkout, pythonpath=[site, checkout])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (fail,) = lines(proc, "FAIL", "provenance")
    assert os.path.realpath(site / "megatron" / "core") in fail and "shadows" in fail, fail
    (checkout / "megatron" / "core" / "__init__.py").unlink()
    (checkout / "megatron" / "core").rmdir()
    proc = run_verify("--provenance", "megatron.core=%s" % checkout, pythonpath=[site, checkout])
    assert proc.returncode == 1 and os.path.realpath(site / "megatron" / "core") in lines(proc, "FAIL")[0]


def test_a_namespace_top_level_name_is_not_judged_by_its_first_portion(two_portions, run_verify, lines):
    """``megatron`` -> the checkout: the first portion is site-packages' energon folder, which says nothing about
    where Megatron-LM comes from; the gate fails naming the portions and what to name instead."""
    site, checkout = two_portions
    proc = run_verify("--provenance", "megatron=%s" % checkout, pythonpath=[site, checkout])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (fail,) = lines(proc, "FAIL", "provenance")
    assert "namespace package" in fail and "megatron.core" in fail, fail
    assert os.path.realpath(site / "megatron") in fail and os.path.realpath(checkout / "megatron") in fail


def test_the_schema_takes_a_dotted_module():
    cfg = from_dict({"provenance": {"megatron.core": "/root/Megatron-LM"}}, "gates.json")
    assert cfg["provenance"] == [("megatron.core", "/root/Megatron-LM")]
    with pytest.raises(ConfigError, match=r"provenance.megatron..core"):
        from_dict({"provenance": {"megatron..core": "/root/Megatron-LM"}}, "gates.json")
