"""A `--source` archive never writes outside its tree and never makes the tool read a header whole, through the
public path (`build.py bake --target miles-cpu --source miles=ARCHIVE`, no engine needed: sources are staged
before one is asked). The archives are built here; tests/unit/test_source_archive.py has the module's own cases.

CVE-2025-4517: on Python 3.11.7 (fixed in 3.11.13) tarfile's `data` filter lets a chain of links whose resolved
path outgrows PATH_MAX through, and a later member is written through it: the old unpacking wrote
`outside/pwned.py` here. A pax header claiming 1 GiB was read whole (tarfile.is_tarfile already did).
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from archive_attacks import member, pax_header_claiming, realpath_overflow, write_tgz
from support import no_engine, one_line

from toolkit.plan.sources import stage_local, tree_digest

OVERFLOW_LENGTHS = range(247, 111, -15)  # as in the unit test: together they overflow under any staging path
SYM, HARD, DIR = tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE


def snapshot(root: Path, skip: Path) -> dict:
    """Every path under `root` but `skip` (links not followed), with its kind, size and link target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath) / d != skip]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p)] = (st.st_mode, st.st_size, os.readlink(p) if p.is_symlink() else None)
    return out


def left_under(project: Path) -> list:
    build = project / "build"
    return sorted(str(p) for p in build.rglob("*") if not p.is_dir() or any(p.iterdir())) if build.exists() else []


def bake(project: Path, archive: Path, tmp_path: Path, preexec_fn=None) -> subprocess.CompletedProcess:
    """`build.py bake --target miles-cpu --source miles=ARCHIVE -o ...` in `project`, with no engine."""
    args = ["bake", "--target", "miles-cpu", "--source", f"miles={archive}", "-o", str(tmp_path / "bake.json")]
    return subprocess.run(
        [sys.executable, "build.py", *args],
        cwd=project,
        env=no_engine(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=preexec_fn,
    )


@pytest.mark.parametrize("component", OVERFLOW_LENGTHS)
def test_the_realpath_overflow_archive_writes_nothing_anywhere(project_copy, tmp_path, component):
    outside = tmp_path / "outside"  # the folder the archive aims at, outside the repository
    outside.mkdir()
    archive = write_tgz(tmp_path / "evil.tgz", realpath_overflow(outside, component, top="miles"))
    before = snapshot(tmp_path, project_copy / "build")
    proc = bake(project_copy, archive, tmp_path)
    assert not (outside / "pwned.py").exists(), f"written outside the tree; build.py said: {proc.stderr[-300:]}"
    assert snapshot(tmp_path, project_copy / "build") == before  # nothing else appeared, or went
    assert left_under(project_copy) == []  # and the staging folder is gone
    one_line(
        proc,
        2,
        "--source miles=",
        "refusing member 'miles/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/llll",
        "passes through the symbolic link 'miles/a'",
    )


LINKS = {
    "hard link to a later member": [member("miles/h.py", HARD, link="miles/f.py"), member("miles/f.py")],
    "link to a link": [member("miles/f.py"), member("miles/a", SYM, link="f.py"), member("miles/b", SYM, link="a")],
    "link to outside": [member("miles/f.py"), member("miles/up", SYM, link="../../../../outside")],
    "link to a folder, then a file under it": [
        member("miles/d/", DIR),
        member("miles/l", SYM, link="d"),
        member("miles/l/x.py"),
    ],
}


@pytest.mark.parametrize("case", sorted(LINKS))
def test_a_link_a_source_tree_does_not_hold_is_refused_with_one_line(project_copy, tmp_path, case):
    archive = write_tgz(tmp_path / "bad.tgz", LINKS[case])
    one_line(bake(project_copy, archive, tmp_path), 2, "--source miles=", "refusing member 'miles/")
    assert left_under(project_copy) == [] and not (tmp_path / "bake.json").exists()


def _address_space(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_a_1_gib_pax_header_is_refused_before_it_is_read(project_copy, tmp_path):
    """The header claims 1 GiB and a few KiB follow. Under a 512 MiB address space the old code died reading it
    (MemoryError, exit 1); now it is exit 2 naming the header, the payload never read."""
    archive = tmp_path / "pax.tgz"
    archive.write_bytes(gzip.compress(pax_header_claiming(1 << 30)))
    assert archive.stat().st_size < 2048
    proc = bake(project_copy, archive, tmp_path, _address_space(512 << 20))
    one_line(proc, 2, "--source miles=", "refusing a pax header of 1073741824 bytes at byte 0 (at most 65536)")
    assert left_under(project_copy) == []


def test_a_legitimate_relative_link_still_stages(project_copy, tmp_path):
    """A file linked to its sibling (before or after it, as git archive orders them) is accepted: the bake gets
    past staging and stops only for want of an engine (exit 3), and the staged tree keeps the link as a link."""
    archive = write_tgz(
        tmp_path / "ok.tgz",
        [
            member("miles/", DIR),
            member("miles/a-base.sh", SYM, link="a.sh"),
            member("miles/a.sh", data=b"echo a\n"),
            member("miles/b-base.sh", SYM, link="a.sh"),
        ],
    )
    one_line(bake(project_copy, archive, tmp_path), 3, "no Docker engine answers")
    assert left_under(project_copy) == []
    staged = stage_local("miles", archive, tmp_path / "s" / "miles")
    for link in ("a-base.sh", "b-base.sh"):
        assert os.readlink(tmp_path / "s" / "miles" / link) == "a.sh"
    assert (tmp_path / "s" / "miles" / "a-base.sh").read_text() == "echo a\n"
    assert staged.digest == tree_digest(tmp_path / "s" / "miles")
