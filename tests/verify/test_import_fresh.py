"""Each import gate imports its module in a fresh interpreter (the image's python), as a process of the image
would: a package that fails half-way leaves nothing behind for a later gate, and a folder that Python merely
accepts as a namespace package (FlashAttention 4's ``flash_attn/cute/`` with FlashAttention 2 absent) is not an
import of the package the gate names."""

from __future__ import annotations

import json
import os
import sys

from verify.kinds import base


def test_a_package_that_fails_half_way_fails_its_submodules_too(tmp_path, run_verify, write_tree, lines):
    """``import pkg.a`` in a fresh process runs pkg/__init__ first, so it fails as pkg does; in one shared process
    the ``pkg.a`` that pkg's __init__ loaded before it raised stayed in sys.modules and passed."""
    write_tree(
        tmp_path,
        {
            "halfpkg/__init__.py": "from . import a\nraise RuntimeError('half-way: the rest is broken')\n",
            "halfpkg/a.py": "X = 1\n",
        },
    )
    cfg = tmp_path / "gates.json"
    cfg.write_text(json.dumps({"imports": ["halfpkg", "halfpkg.a"]}))
    proc = run_verify("--config", cfg, pythonpath=[tmp_path])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = lines(proc, "FAIL", "import")
    assert [f.split()[2] for f in fails] == ["halfpkg", "halfpkg.a"], proc.stdout
    assert all("RuntimeError: half-way" in f for f in fails), fails
    assert not lines(proc, "PASS")


def test_each_import_runs_in_its_own_image_python(tmp_path, run_verify, write_tree):
    record = (
        "import os, sys\n"
        "open(os.path.join(os.environ['SEEN_DIR'], __name__), 'w').write('%d %s' % (os.getpid(), sys.executable))\n"
    )
    write_tree(tmp_path / "pkgs", {"seen_one.py": record, "seen_two.py": record})
    seen = tmp_path / "seen"
    seen.mkdir()
    proc = run_verify(
        "--import", "seen_one", "--import", "seen_two", pythonpath=[tmp_path / "pkgs"], env={"SEEN_DIR": str(seen)}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    one, two = ((seen / name).read_text().split(" ", 1) for name in ("seen_one", "seen_two"))
    assert one[0] != two[0], "both modules were imported by one process"
    assert os.path.realpath(one[1]) == os.path.realpath(sys.executable) == os.path.realpath(two[1])


def test_a_namespace_package_is_not_the_package(tmp_path, run_verify, write_tree, lines):
    """FlashAttention 4 alone: ``flash_attn`` resolves to a namespace package of the folder ``cute/`` sits in."""
    write_tree(tmp_path / "fa4", {"flash_attn/cute/__init__.py": "VERSION = '4'\n"})
    proc = run_verify("--import", "flash_attn", "--import", "flash_attn.cute", pythonpath=[tmp_path / "fa4"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (fail,) = lines(proc, "FAIL", "import")
    assert fail.split()[2] == "flash_attn" and "namespace package" in fail, fail
    assert str(tmp_path / "fa4" / "flash_attn") in fail  # the portion found, so a person sees what is installed
    assert [p.split()[2] for p in lines(proc, "PASS", "import")] == ["flash_attn.cute"]
    # with FlashAttention 2's package beside it, the same gate passes
    write_tree(tmp_path / "fa2", {"flash_attn/__init__.py": "__version__ = '2.8.3'\n"})
    proc = run_verify("--import", "flash_attn", pythonpath=[tmp_path / "fa2", tmp_path / "fa4"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2.8.3" in lines(proc, "PASS", "import")[0]


def test_a_namespace_package_names_every_portion(tmp_path, run_verify, write_tree, lines):
    write_tree(tmp_path / "one", {"spread/x/__init__.py": ""})
    write_tree(tmp_path / "two", {"spread/y/__init__.py": ""})
    proc = run_verify("--import", "spread", pythonpath=[tmp_path / "one", tmp_path / "two"])
    (fail,) = lines(proc, "FAIL", "import")
    assert str(tmp_path / "one" / "spread") in fail and str(tmp_path / "two" / "spread") in fail, fail


def test_children_are_bounded_by_the_cpus_and_a_cap(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert base.child_slots() == base.MAX_CHILDREN
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert base.child_slots() == 1
