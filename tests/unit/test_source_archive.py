"""toolkit/plan/source_archive.py on its own: what a `--source` archive may hold, judged before anything is
written, and written with no path resolved through a link. The same archives through build.py are in
tests/test_source_archive_escape.py."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from archive_attacks import (
    component_length,
    gnu_longname_claiming,
    member,
    pax_header_claiming,
    realpath_overflow,
    write_tgz,
)
from support import UPSTREAM

from toolkit.errors import UsageError
from toolkit.plan import source_archive
from toolkit.plan.source_archive import MAX_HEADER_BYTES, is_archive, unpack
from toolkit.plan.sources import tree_digest

SYM, HARD, DIR = tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE


def tree(root: Path) -> dict:
    """Every path under `root` (links not followed): its kind and, for a link, its target, for a file, its bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


@pytest.fixture
def place(tmp_path):
    """(staging parent, outside folder): what `unpack` may touch, and a folder it must never write into."""
    (tmp_path / "s").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "kept.txt").write_text("before\n")
    return tmp_path / "s", tmp_path / "outside"


def refused(archive: Path, parent: Path, *needles: str) -> str:
    with pytest.raises(UsageError) as e:
        unpack(archive, parent / "miles", "--source miles=x")
    line = str(e.value)
    assert "\n" not in line
    for needle in needles:
        assert needle in line, line
    assert list(parent.iterdir()) == [], "refused before anything was written"
    return line


# ---- CVE-2025-4517: the realpath-overflow chain at component lengths 15 apart, so the staging path's length
# does not matter: each length overflows PATH_MAX under staging paths of a window of 255 bytes (its last link's
# name), these cover staging paths of about 20 to 2,000 bytes.

OVERFLOW_LENGTHS = range(247, 111, -15)


@pytest.mark.parametrize("component", OVERFLOW_LENGTHS)
def test_the_realpath_overflow_chain_is_refused_at_its_first_step_through_a_link(tmp_path, place, component):
    parent, outside = place
    archive = write_tgz(tmp_path / "evil.tgz", realpath_overflow(outside, component, "miles"))
    before = tree(tmp_path)
    line = refused(archive, parent, "refusing member 'miles/a/b/c/d/", "passes through the symbolic link 'miles/a'")
    assert len(line) < 400
    assert not (outside / "pwned.py").exists()
    assert tree(tmp_path) == before


def test_the_chain_sized_for_this_staging_path_is_refused_too(tmp_path, place):
    parent, outside = place
    component = component_length(parent / "miles.unpack" / "miles")
    archive = write_tgz(tmp_path / "evil.tgz", realpath_overflow(outside, component, "miles"))
    refused(archive, parent, "passes through the symbolic link 'miles/a'")
    assert os.listdir(outside) == ["kept.txt"]


# ---- links: a source tree's, or refused


def test_a_relative_link_to_a_sibling_file_unpacks_before_or_after_its_target(tmp_path, place):
    parent, _ = place
    members = [
        member("miles/", DIR),
        member("miles/pkg/alias-first.py", SYM, link="real.py"),  # git archive's order: the link can come first
        member("miles/pkg/real.py", data=b"X = 1\n"),
        member("miles/pkg/alias-after.py", SYM, link="real.py"),
        member("miles/up.py", SYM, link="pkg/real.py"),
        member("miles/pkgs", SYM, link="pkg"),
        member("miles/pkg/root", SYM, link=".."),
        member("miles/pkg/hard.py", HARD, link="miles/pkg/real.py"),
    ]
    unpack(write_tgz(tmp_path / "ok.tgz", members), parent / "miles", "--source miles=x")
    got = tree(parent / "miles")
    assert got == {
        "pkg": ("dir",),
        "pkg/real.py": ("file", b"X = 1\n"),
        "pkg/hard.py": ("file", b"X = 1\n"),
        "pkg/alias-first.py": ("link", "real.py"),
        "pkg/alias-after.py": ("link", "real.py"),
        "pkg/root": ("link", ".."),
        "up.py": ("link", "pkg/real.py"),
        "pkgs": ("link", "pkg"),
    }
    assert (parent / "miles" / "pkg" / "alias-first.py").read_text() == "X = 1\n"
    assert os.stat(parent / "miles" / "pkg" / "hard.py").st_ino == os.stat(parent / "miles" / "pkg" / "real.py").st_ino
    assert sorted(os.listdir(parent)) == ["miles"]  # the staging folder is gone


REFUSED = {
    "hard link to a later member": (
        [member("miles/h.py", HARD, link="miles/f.py"), member("miles/f.py")],
        "'miles/h.py': a hard link to no regular file of an earlier member",
    ),
    "hard link to a symbolic link": (
        [member("miles/f.py"), member("miles/l.py", SYM, link="f.py"), member("miles/h.py", HARD, link="miles/l.py")],
        "'miles/h.py': a hard link to a link",
    ),
    "hard link out of the tree": (
        [member("miles/f.py"), member("miles/h", HARD, link="miles/../../etc/passwd")],
        "'miles/h': a hard link to a path with '..'",
    ),
    "link to a link": (
        [member("miles/f.py"), member("miles/a.py", SYM, link="f.py"), member("miles/b.py", SYM, link="a.py")],
        "'miles/b.py': a symbolic link to a link",
    ),
    "link through a link": (
        [member("miles/d/f.py"), member("miles/e", SYM, link="d"), member("miles/l.py", SYM, link="e/f.py")],
        "'miles/l.py': a symbolic link through a link",
    ),
    "link out of the tree": (
        [member("miles/f.py"), member("miles/l", SYM, link="../../outside")],
        "'miles/l': a symbolic link out of the tree",
    ),
    "link to the staging folder": (  # inside the folder tarfile unpacks into, but above the tree once stripped
        [member("miles/f.py"), member("miles/l", SYM, link="..")],
        "'miles/l': a symbolic link out of the tree",
    ),
    "absolute link": ([member("miles/f.py"), member("miles/etc", SYM, link="/etc")], "to an absolute path"),
    "link to nothing": ([member("miles/f.py"), member("miles/l", SYM, link="gone.py")], "to nothing in the archive"),
    "link to a folder, then a file under it": (
        [member("miles/d/", DIR), member("miles/l", SYM, link="d"), member("miles/l/x.py")],
        "'miles/l/x.py': its path passes through the symbolic link 'miles/l'",
    ),
    "a file, then a file under it": (
        [member("miles/f"), member("miles/f/x.py")],
        "'miles/f/x.py': its path passes through the file 'miles/f'",
    ),
    "a member twice": ([member("miles/f.py"), member("miles/f.py", data=b"again")], "'miles/f.py' appears twice"),
    "a link replaced by a file": (
        [member("miles/f.py"), member("miles/l", SYM, link="f.py"), member("miles/l")],
        "'miles/l' appears twice",
    ),
    "dot-dot name": ([member("miles/ok.py"), member("miles/../../escape.py")], "a path with '..'"),
    "absolute name": ([member("/tmp/escape.py")], "an absolute path"),
    "fifo": ([member("miles/ok.py"), member("miles/fifo", tarfile.FIFOTYPE)], "'miles/fifo': a FIFO"),
    "device": ([member("miles/ok.py"), member("miles/dev", tarfile.BLKTYPE)], "'miles/dev': a block device"),
    "unknown type": ([member("miles/ok.py"), member("miles/q", b"Q")], "'miles/q': of type 'Q'"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_link_or_name_a_source_tree_does_not_hold_is_refused_before_anything_is_written(tmp_path, place, case):
    members, needle = REFUSED[case]
    parent, outside = place
    refused(write_tgz(tmp_path / "bad.tgz", members), parent, needle)
    assert os.listdir(outside) == ["kept.txt"]


def test_nothing_is_written_through_a_link_even_if_the_judgement_missed_it(tmp_path, monkeypatch):
    """The writer makes symbolic links last: with the tree's judgement switched off, the folder-link-then-file
    archive fails (the link's name is a folder by the time the link is made) instead of writing outside."""
    monkeypatch.setattr(source_archive, "tree_problem", lambda members: "")
    (tmp_path / "s").mkdir()
    (tmp_path / "outside").mkdir()
    members = [member("miles/f.py"), member("miles/l", SYM, link=str(tmp_path / "outside")), member("miles/l/x.py")]
    with pytest.raises(UsageError, match="cannot unpack"):
        unpack(write_tgz(tmp_path / "bad.tgz", members), tmp_path / "s" / "miles", "x")
    assert os.listdir(tmp_path / "outside") == []


# ---- headers are capped before they are read


@pytest.mark.parametrize("make, kind", [(pax_header_claiming, "pax"), (gnu_longname_claiming, "GNU long-name")])
@pytest.mark.parametrize("size", [1 << 30, MAX_HEADER_BYTES + 1])
def test_a_huge_extended_header_is_refused_before_its_payload_is_read(tmp_path, place, make, kind, size):
    parent, _ = place
    archive = tmp_path / "huge.tgz"
    archive.write_bytes(gzip.compress(make(size)))  # the header claims `size` bytes; a few KiB follow
    tracemalloc.start()
    try:
        assert is_archive(archive)  # reads its first block only
        refused(archive, parent, f"refusing a {kind} header of {size} bytes at byte 0 (at most {MAX_HEADER_BYTES})")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_a_header_just_under_the_cap_is_read(tmp_path, place):
    parent, _ = place
    name = "miles/" + "/".join(["d" * 200] * 16) + "/f.py"  # a 3 KiB pax path (room for xdist tmp)
    unpack(write_tgz(tmp_path / "long.tgz", [member(name)]), parent / "miles", "x")
    assert (parent / "miles" / name.removeprefix("miles/")).read_bytes() == b"x = 1\n"


def _raw_tar(members) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _at_time(pair, mtime: int):
    pair[0].mtime = mtime
    return pair


def _pax(records: bytes) -> bytes:
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, len(records)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + records.ljust(-(-len(records) // 512) * 512, b"\0")


@pytest.mark.parametrize(
    "stream, needle",
    [
        (_pax(b"10 path=a\n") * 9 + _raw_tar([member("miles/f.py")]), "more than 8 extended headers"),
        (_pax(b"99 path=a\n") + _raw_tar([member("miles/f.py")]), "a malformed pax header at byte 0"),
        (_pax(b"1" * 4000 + b"\n") + _raw_tar([member("miles/f.py")]), "a malformed pax header"),  # CVE-2024-6232
        (_pax(b"22 GNU.sparse.major=1\n") + _raw_tar([member("miles/f.py")]), "a sparse file"),
        (_raw_tar([member("miles/f.py")]) + b"\0" * (2 << 20), "bytes after the archive's end"),
        (_raw_tar([member("miles/f.py", data=b"x" * 4000)])[:2048], "the archive ends inside member 'miles/f.py'"),
        (b"\1" * 512, "a corrupt tar header at byte 0"),
        (_raw_tar([_at_time(member("miles/f.py"), 1 << 60)]), "a corrupt size or time in the header at byte 1024"),
    ],
    ids=["header-chain", "pax-length", "pax-digits", "sparse", "trailer", "truncated", "corrupt", "time"],
)
def test_a_stream_that_is_not_plain_tar_is_one_line(tmp_path, place, stream, needle):
    parent, _ = place
    archive = tmp_path / "bad.tgz"
    archive.write_bytes(gzip.compress(stream))
    refused(archive, parent, needle)


def test_an_uncompressed_or_xz_archive_still_unpacks(tmp_path, place):
    parent, _ = place
    raw = _raw_tar([member("miles/", DIR), member("miles/f.py")])
    (tmp_path / "a.tar").write_bytes(raw)
    unpack(tmp_path / "a.tar", parent / "one", "x")
    import lzma

    (tmp_path / "a.tar.xz").write_bytes(lzma.compress(raw))
    unpack(tmp_path / "a.tar.xz", parent / "two", "x")
    assert tree(parent / "one") == tree(parent / "two") == {"f.py": ("file", b"x = 1\n")}


# ---- the real upstream snapshots: every link they hold is accepted, and the tree is tarfile's


@pytest.mark.parametrize("name", ["miles-v0.1.0.tar.gz", "megatron-lm-37f91617b.tar.gz"])
def test_an_upstream_snapshot_unpacks_as_tarfile_unpacks_it(tmp_path, name):
    archive = UPSTREAM / name
    if not archive.exists():
        pytest.skip(f"{archive} is not beside the checkout")
    with tarfile.open(archive) as tar:
        links = [m.name for m in tar if m.issym() or m.islnk()]
        tar.extractall(tmp_path / "by-tarfile", filter="data")  # a trusted archive: the reference
    (tmp_path / "s").mkdir()
    commit = unpack(archive, tmp_path / "s" / "tree", "x")
    assert len(commit) == 40
    (top,) = os.listdir(tmp_path / "by-tarfile")
    assert tree(tmp_path / "s" / "tree") == tree(tmp_path / "by-tarfile" / top)
    assert tree_digest(tmp_path / "s" / "tree") == tree_digest(tmp_path / "by-tarfile" / top)
    for link in links:
        assert (tmp_path / "s" / "tree" / link.split("/", 1)[1]).is_symlink()


def test_a_folder_on_the_way_that_is_a_link_is_never_entered(tmp_path):
    """The writer's folders are opened with O_NOFOLLOW from their parent's descriptor: a link where a folder
    should be (put there behind its back) stops it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "pkg").symlink_to(tmp_path / "outside")
    folders = source_archive._Folders(tmp_path / "staging")
    try:
        with pytest.raises(OSError):
            folders.walk((b"pkg", b"sub"))
    finally:
        folders.close()
    assert os.listdir(tmp_path / "outside") == []


def test_the_module_does_not_unpack_with_tarfile():
    """No tarfile parsing or extraction is left in the module (its filter is what CVE-2025-4517 bypasses)."""
    text = Path(source_archive.__file__).read_text()
    assert "import tarfile" not in text and "extractall" not in text
