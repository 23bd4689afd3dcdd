"""Unpack a `--source` tarball, which nobody reviewed: bounded, contained, and refused whole or staged whole.

The archive is read by this module, not by tarfile: tarfile reads a pax or GNU long-name header's payload whole
before anything can cap it, its pax parser backtracks quadratically on some input (CVE-2024-6232), and its `data`
filter trusts `os.path.realpath`, which stops resolving once a path outgrows PATH_MAX, so a chain of links can
pass it and have a later member written outside the tree (CVE-2025-4517; Python 3.11 before 3.11.13).

Two passes over the decompressed stream. The first reads every header and writes nothing: every extended header
(pax `x`/`g`, GNU `L`/`K`) is at most MAX_HEADER_BYTES, checked before its payload is read; at most
MILES_SOURCE_MAX_FILES members and MILES_SOURCE_MAX_BYTES bytes in all (environment variables; defaults below);
names a file system can hold (at most MAX_NAME_DEPTH folders deep, MAX_PATH_BYTES bytes); regular files, folders
and links only (no device, FIFO or sparse file); then the stream to its end (so a corrupt checksum, gzip's CRC,
refuses the archive) and room on the disk. Then the tree is judged as a whole, lexically, before anything is
written: no member outside it, through a link or twice; a source tree's links only, each to a regular file or
folder of the archive, inside the tree, reached through no link (`tree_problem`). The second pass writes member by
member with no path the kernel resolves through a link: each folder opened with O_NOFOLLOW from its parent's
descriptor, each file created with O_CREAT|O_EXCL|O_NOFOLLOW, symbolic links last, when nothing is written after
them. A refusal is one line (exit 2) and the caller's clean-up scope removes whatever was made.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from toolkit.errors import BuildFailed, UsageError, short
from toolkit.strict import env_whole

DEFAULT_MAX_FILES = 100_000  # a large checkout (Megatron-LM) has about 10,000
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB unpacked; miles is about 10 MB
MAX_LIMIT = 1 << 50  # the largest either cap may be set to (a PiB; no disk here holds as many files either)
DISK_MARGIN = 64 << 20  # bytes left free on the staging disk after unpacking
NAME_MAX = 255  # bytes per path component on Linux file systems
MAX_NAME_DEPTH = 256  # folders in a member's name; the deepest file of Megatron-LM is 8
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux
# A pax or GNU long-name header's payload: a path and a link target of PATH_MAX bytes each and a few short
# records fit eight times over (`git archive` writes one of 52 bytes); tarfile would read any size
# it is told whole, into memory.
MAX_HEADER_BYTES = 64 << 10
MAX_HEADER_CHAIN = 8  # extended headers before one member: a global pax header, a pax header, GNU's L and K are 4
# Extended headers' payloads in all: a pax header for a long path (a few hundred bytes) on each of the default
# 100,000 members fits; `git archive` writes one of 52 bytes for a whole tree (Megatron-LM's included).
MAX_HEADERS_TOTAL = 64 << 20
MAX_TRAILER_BYTES = 1 << 20  # decompressed bytes after the end-of-archive block: tar pads to 10 KiB records
CHUNK = 1 << 20  # bytes read or written at a time
MAX_TIME = 1 << 40  # seconds either side of 1970 a member's time may be (os.utime takes no more)

BLOCK = 512
REGULAR, DIRECTORY, SYMLINK, HARDLINK = "file", "folder", "symbolic link", "hard link"
TYPES = {b"0": REGULAR, b"\0": REGULAR, b"7": REGULAR, b"5": DIRECTORY, b"2": SYMLINK, b"1": HARDLINK}
PAX, GLOBAL_PAX, GNU_NAME, GNU_LINK = b"x", b"g", b"L", b"K"
EXTENDED = {PAX: "pax", b"X": "pax", GLOBAL_PAX: "global pax", GNU_NAME: "GNU long-name", GNU_LINK: "GNU long-link"}
SPECIAL = {b"3": "a character device", b"4": "a block device", b"6": "a FIFO", b"S": "a sparse file"}
POSIX_MAGIC = b"ustar\x00"  # ustar and pax: the name's prefix field is bytes 345-500 (GNU's header uses them else)
PAX_MTIME_RE = re.compile(rb"-?[0-9]{1,20}(\.[0-9]{0,20})?")
GLOBAL_REFUSED = (b"path", b"linkpath", b"size")  # a global header that would rename or resize every member


def limit(variable: str, default: int) -> int:
    """A cap from the environment (a whole number from 1 to MAX_LIMIT, toolkit/strict.py), else its default."""
    return env_whole(variable, default, MAX_LIMIT)


@dataclass(slots=True)
class Member:
    """One member as the archive names it (bytes, as the file system takes them) and where it goes."""

    name: bytes
    kind: str
    size: int
    mode: int
    mtime: float
    link: bytes
    parts: tuple = ()  # the name's components, `.` and empty ones left out

    @property
    def shown(self) -> str:
        return short(self.name.decode("utf-8", "surrogateescape"))


@dataclass
class Archive:
    members: list = field(default_factory=list)
    regular_bytes: int = 0
    commit: str = ""  # the commit `git archive` records in its global pax header


# ---- the stream


def _open_stream(raw: BinaryIO) -> io.BufferedIOBase | BinaryIO:
    """The decompressed stream of `raw` (gzip, bzip2, xz, or none), read as it is asked for: never all at once."""
    raw.seek(0)
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


class _Stream:
    """The tar stream, forward only, counting its bytes."""

    def __init__(self, file: io.BufferedIOBase | BinaryIO, what: str):
        self.file, self.what, self.pos = file, what, 0

    def read(self, n: int) -> bytes:
        """Up to `n` bytes (fewer only at the end of the stream)."""
        out = []
        while n > 0:
            chunk = self.file.read(min(n, CHUNK))
            if not chunk:
                break
            out.append(chunk)
            n -= len(chunk)
            self.pos += len(chunk)
        return b"".join(out)

    def exactly(self, n: int, where: str) -> bytes:
        data = self.read(n)
        if len(data) != n:
            raise UsageError(f"{self.what}: cannot unpack (the archive ends inside {where})")
        return data

    def skip_to(self, pos: int, where: str) -> None:
        while self.pos < pos:
            self.exactly(min(pos - self.pos, CHUNK), where)


# ---- headers


def _number(field: bytes) -> int | None:
    """A header's number: octal text (NUL or space ended), or GNU's base-256; None if it is neither."""
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    if field[:1] == b"\xff":
        return None  # a negative base-256 number: no size, mode or time of a source file
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not all(48 <= c <= 55 for c in text):
        return None
    return int(text, 8)


def _checksum_ok(block: bytes) -> bool:
    """The header's checksum: the sum of its bytes, its checksum field read as spaces; some writers sum them
    signed."""
    want = _number(block[148:156])
    unsigned = 256 + sum(block[:148]) + sum(block[156:])
    if want == unsigned:
        return True
    return want == unsigned - 256 * sum(1 for b in block[:148] + block[156:] if b > 127)


def _text(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def _pax_records(payload: bytes, what: str, offset: int) -> dict:
    """The records of a pax header ("LENGTH KEY=VALUE\\n" each, filling it), parsed in one pass."""
    records, pos = {}, 0
    while pos < len(payload):
        space = payload.find(b" ", pos, pos + 21)
        digits = payload[pos:space] if space > pos else b""
        length = int(digits) if digits.isdigit() else 0
        record = payload[space + 1 : pos + length]
        if length <= len(digits) + 1 or pos + length > len(payload) or not record.endswith(b"\n"):
            raise UsageError(f"{what}: cannot unpack (a malformed pax header at byte {offset})")
        key, eq, value = record[:-1].partition(b"=")
        if not eq or not key:
            raise UsageError(f"{what}: cannot unpack (a malformed pax header at byte {offset})")
        records[key] = value
        pos += length
    return records


def read_members(stream: _Stream, what: str, caps: tuple, archive: Archive) -> Iterator[Member]:
    """Each member of the tar stream in order, with its header's caps checked (`caps`: most members, most bytes);
    after a member is yielded the caller may read its data from `stream`, and what it leaves is skipped. A global
    pax header's `comment` (the commit `git archive` records) goes to `archive.commit`."""
    max_files, max_bytes = caps
    count = regular = headers_total = chain = 0
    pax: dict = {}
    long_name = long_link = None
    while True:
        offset = stream.pos
        block = stream.read(BLOCK)
        if not block and not chain:  # the stream ends on a member's boundary: its end, as tarfile reads it
            break
        if len(block) < BLOCK:
            raise UsageError(f"{what}: cannot unpack (the archive ends inside a header at byte {offset})")
        if block == bytes(BLOCK):
            if chain:
                raise UsageError(f"{what}: cannot unpack (an extended header at byte {offset} names no member)")
            break
        size, mode = _number(block[124:136]), _number(block[100:108])
        mtime: float | None = _number(block[136:148])
        if not _checksum_ok(block) or size is None or mode is None or mtime is None:
            raise UsageError(f"{what}: cannot unpack (a corrupt tar header at byte {offset})")
        typeflag = block[156:157]
        if typeflag in EXTENDED:
            # Checked before the payload is read: the size field is all a hostile header costs here.
            if size > MAX_HEADER_BYTES:
                raise UsageError(
                    f"{what}: refusing a {EXTENDED[typeflag]} header of {size} bytes at byte {offset} "
                    f"(at most {MAX_HEADER_BYTES})"
                )
            chain += 1
            headers_total += size
            if chain > MAX_HEADER_CHAIN or headers_total > MAX_HEADERS_TOTAL:
                raise UsageError(
                    f"{what}: refusing the header at byte {offset}: more than {MAX_HEADER_CHAIN} extended headers "
                    f"before one member or {MAX_HEADERS_TOTAL} bytes of them in all"
                )
            payload = stream.exactly(-(-size // BLOCK) * BLOCK, "a header")[:size]
            if typeflag == GNU_NAME:
                long_name = _text(payload)
            elif typeflag == GNU_LINK:
                long_link = _text(payload)
            else:
                records = _pax_records(payload, what, offset)
                if any(key.startswith(b"GNU.sparse.") for key in records):
                    raise UsageError(f"{what}: refusing the member after byte {offset}: a sparse file")
                if typeflag == GLOBAL_PAX:
                    if any(key in records for key in GLOBAL_REFUSED):
                        raise UsageError(f"{what}: refusing a global pax header that renames or resizes every member")
                    if b"comment" in records:
                        archive.commit = records[b"comment"].decode("utf-8", "replace")
                else:
                    pax.update(records)
            continue
        name = _text(block[0:100])
        prefix = _text(block[345:500]) if block[257:263] == POSIX_MAGIC else b""
        name = prefix + b"/" + name if prefix else name
        name = pax.get(b"path", long_name if long_name is not None else name)
        link = pax.get(b"linkpath", long_link if long_link is not None else _text(block[157:257]))
        if b"size" in pax:
            size = int(pax[b"size"]) if pax[b"size"].isdigit() and len(pax[b"size"]) <= 20 else None
        if b"mtime" in pax:
            mtime = float(pax[b"mtime"]) if PAX_MTIME_RE.fullmatch(pax[b"mtime"]) else None
        if size is None or mtime is None or not -MAX_TIME < mtime < MAX_TIME:
            raise UsageError(f"{what}: cannot unpack (a corrupt size or time in the header at byte {offset})")
        pax, long_name, long_link, chain = {}, None, None, 0
        shown = short(name.decode("utf-8", "surrogateescape"))
        count += 1
        if count > max_files:
            raise UsageError(f"{what}: more than {max_files} members (MILES_SOURCE_MAX_FILES raises the cap)")
        if typeflag == b"\0" and name.endswith(b"/"):
            typeflag = b"5"  # the old V7 way of writing a folder
        if typeflag not in TYPES:
            kind = SPECIAL.get(typeflag, f"of type {short(typeflag.decode('latin-1'))}")
            raise UsageError(f"{what}: refusing member {shown}: {kind}, not a file, folder or link")
        member = Member(name=name, kind=TYPES[typeflag], size=size, mode=mode, mtime=mtime, link=link)
        if member.kind == REGULAR:
            regular += size
            if regular > max_bytes:
                raise UsageError(
                    f"{what}: unpacks to more than {max_bytes} bytes (MILES_SOURCE_MAX_BYTES raises the cap)"
                )
        else:
            member.size = 0  # only a regular file's data follows its header (as tarfile reads it)
        member.parts = _name_parts(member, what)
        data_start = stream.pos
        yield member
        stream.skip_to(data_start + -(-member.size // BLOCK) * BLOCK, f"member {shown}")


def _name_parts(member: Member, what: str) -> tuple:
    """The member's path as components, after the checks of its name alone."""
    name = member.name
    if any(len(part) > NAME_MAX for part in name.split(b"/")):
        raise UsageError(f"{what}: member {member.shown} has a name longer than {NAME_MAX} bytes")
    if name.count(b"/") > MAX_NAME_DEPTH or len(name) > MAX_PATH_BYTES or len(member.link) > MAX_PATH_BYTES:
        raise UsageError(
            f"{what}: member {member.shown} is more than {MAX_NAME_DEPTH} folders deep or {MAX_PATH_BYTES} bytes long"
        )
    problem = _path_problem(name)
    if problem:
        raise UsageError(f"{what}: refusing member {member.shown}: {problem}")
    return tuple(p for p in name.split(b"/") if p not in (b"", b"."))


def _path_problem(path: bytes) -> str:
    if path.startswith(b"/"):
        return "an absolute path"
    if b"\0" in path:
        return "a path with a NUL byte"
    if b".." in path.split(b"/"):
        return "a path with '..'"
    return ""


# ---- the tree, judged whole before anything is written


def top_folder(members: list) -> tuple:
    """The archive's one top folder, which is stripped (as `git archive --prefix` writes one), else ()."""
    tops = {m.parts[0] for m in members if m.parts}
    if len(tops) != 1:
        return ()
    top = next(iter(tops))
    return (top,) if all(m.kind == DIRECTORY for m in members if m.parts == (top,)) else ()


def tree_problem(members: list) -> str:
    """Why the members cannot be unpacked as a source tree, or "". Every path is judged lexically, which is what
    the kernel does when no component is a link: so no member's path, and no link's target path, may pass
    through a link member (or a file); a symbolic link must resolve inside the tree (below the top folder that is
    stripped) to a regular file or folder of the archive, and a hard link to a regular file of an earlier member;
    a path may name one member only (a folder may appear twice)."""
    kinds: dict = {}
    for m in members:
        kinds.setdefault(m.parts, m.kind)
    folders = {m.parts[:i] for m in members for i in range(len(m.parts))}  # the parents each member needs
    root = top_folder(members)

    def kind_of(parts: tuple) -> str:
        return kinds.get(parts) or (DIRECTORY if parts in folders else "")

    seen: dict = {}
    for m in members:
        shown = m.shown
        earlier = seen.get(m.parts)
        if earlier is not None and not (earlier == DIRECTORY and m.kind == DIRECTORY):
            return f"member {shown} appears twice"
        seen[m.parts] = m.kind
        for i in range(1, len(m.parts)):
            if kinds.get(m.parts[:i], DIRECTORY) != DIRECTORY:
                through = b"/".join(m.parts[:i]).decode("utf-8", "surrogateescape")
                return f"refusing member {shown}: its path passes through the {kinds[m.parts[:i]]} {short(through)}"
        if m.parts == () and m.kind != DIRECTORY:
            return f"refusing member {shown}: the tree's root is not a folder"
        if m.kind == HARDLINK:
            problem = _path_problem(m.link) or ("" if m.link.strip(b"/.") else "an empty target")
            target = tuple(p for p in m.link.split(b"/") if p not in (b"", b"."))
            if problem:
                return f"refusing member {shown}: a hard link to {problem}"
            if seen.get(target) != REGULAR:
                what = kind_of(target)
                if what in (SYMLINK, HARDLINK):
                    return f"refusing member {shown}: a hard link to a link"
                return f"refusing member {shown}: a hard link to no regular file of an earlier member"
        elif m.kind == SYMLINK:
            problem = _link_problem(m, kind_of, len(root))
            if problem:
                return f"refusing member {shown}: a symbolic link {problem}"
    return ""


def _link_problem(m: Member, kind_of, root_len: int) -> str:
    """Why a symbolic link's target, resolved lexically from the link's folder, is not a regular file or folder
    of the archive inside the tree, reached through folders only; or ""."""
    if not m.link:
        return "to nothing"
    if m.link.startswith(b"/"):
        return "to an absolute path"
    if b"\0" in m.link:
        return "with a NUL byte in its target"
    steps = [p for p in m.link.split(b"/") if p not in (b"", b".")]
    path = list(m.parts[:-1])
    for i, step in enumerate(steps):
        if step == b"..":
            if len(path) <= root_len:
                return "out of the tree"
            path.pop()
            continue
        path.append(step)
        kind = kind_of(tuple(path))
        last = i == len(steps) - 1
        if kind in (SYMLINK, HARDLINK):
            return "to a link" if last else "through a link"
        if not kind:
            return "to nothing in the archive"
        if kind != DIRECTORY and not last:
            return "through a file"
    return ""


# ---- writing, with no path resolved through a link


class _Folders:
    """Descriptors of the folders of the last path walked, from the staging folder down, each opened with
    O_NOFOLLOW from its parent's; a member's folders are made (mkdir) where missing and checked (lstat)."""

    FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, root: Path):
        self.names: list = []
        self.fds = [os.open(root, self.FLAGS)]

    def walk(self, parts: tuple) -> int:
        """The descriptor of the folder `parts` (made where missing)."""
        keep = 0
        while keep < min(len(parts), len(self.names)) and self.names[keep] == parts[keep]:
            keep += 1
        while len(self.names) > keep:
            self.names.pop()
            os.close(self.fds.pop())
        for part in parts[keep:]:
            parent = self.fds[-1]
            try:
                os.mkdir(part, 0o777, dir_fd=parent)
            except FileExistsError:
                pass
            if not stat.S_ISDIR(os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode):
                raise OSError(errno.ENOTDIR, "not a folder", part.decode("utf-8", "surrogateescape"))
            self.fds.append(os.open(part, self.FLAGS, dir_fd=parent))
            self.names.append(part)
        return self.fds[-1]

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())


def _file_mode(mode: int) -> int:
    """tarfile's `data` filter's mode for a regular file: no set-id or sticky bit, no write but the owner's, the
    owner's read and write, executable only where the owner may execute."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _write_file(stream: _Stream, m: Member, parent: int) -> None:
    fd = os.open(m.parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
    try:
        left = m.size
        while left:
            data = stream.exactly(min(left, CHUNK), f"member {m.shown}")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            left -= len(data)
        os.fchmod(fd, _file_mode(m.mode))
        os.utime(fd, (m.mtime, m.mtime))
    finally:
        os.close(fd)


def _hard_link(m: Member, parent: int, root: Path) -> None:
    target = tuple(p for p in m.link.split(b"/") if p not in (b"", b"."))
    at = _Folders(root)
    try:
        os.link(target[-1], m.parts[-1], src_dir_fd=at.walk(target[:-1]), dst_dir_fd=parent, follow_symlinks=False)
    finally:
        at.close()
    fd = os.open(m.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        os.fchmod(fd, _file_mode(m.mode))
        os.utime(fd, (m.mtime, m.mtime))
    finally:
        os.close(fd)


def write_tree(stream: _Stream, expected: list, staging: Path, what: str, caps: tuple) -> None:
    """The second pass: the same members again (any difference refuses the archive), written under `staging`:
    folders and files in order, symbolic links after them, then the folders' times."""
    folders = _Folders(staging)
    links, dirs = [], []
    count = 0
    try:
        for m in read_members(stream, what, caps, Archive()):
            want = expected[count] if count < len(expected) else None
            count += 1
            if want is None or (m.name, m.kind, m.size, m.link) != (want.name, want.kind, want.size, want.link):
                raise UsageError(f"{what}: the archive changed while it was unpacked")
            if m.kind == SYMLINK:
                links.append(m)  # last: nothing is written after them
            elif m.kind == DIRECTORY:
                if m.parts:
                    folders.walk(m.parts)
                    dirs.append(m)
            elif m.kind == REGULAR:
                _write_file(stream, m, folders.walk(m.parts[:-1]))
            else:
                _hard_link(m, folders.walk(m.parts[:-1]), staging)
        if count != len(expected):
            raise UsageError(f"{what}: the archive changed while it was unpacked")
        for m in links:
            parent = folders.walk(m.parts[:-1])
            os.symlink(m.link, m.parts[-1], dir_fd=parent)
            os.utime(m.parts[-1], (m.mtime, m.mtime), dir_fd=parent, follow_symlinks=False)
        for m in sorted(dirs, key=lambda d: d.parts, reverse=True):  # a folder's time, once nothing enters it
            parent = folders.walk(m.parts[:-1])
            os.utime(m.parts[-1], (m.mtime, m.mtime), dir_fd=parent, follow_symlinks=False)
    finally:
        folders.close()


# ---- the module's entry points


def member_caps() -> tuple:
    """(most members, most bytes unpacked), from the environment."""
    return limit("MILES_SOURCE_MAX_FILES", DEFAULT_MAX_FILES), limit("MILES_SOURCE_MAX_BYTES", DEFAULT_MAX_BYTES)


def scan(raw: BinaryIO, staging_parent: Path, what: str, caps: tuple) -> Archive:
    """The first pass: every member, checked, nothing written; UsageError naming the first problem."""
    stream = _Stream(_open_stream(raw), what)
    archive = Archive()
    for m in read_members(stream, what, caps, archive):
        archive.members.append(m)
        archive.regular_bytes += m.size
    if not archive.members:
        raise UsageError(f"{what}: the archive is empty")
    end = stream.pos  # to the end of the compressed stream: its checksum is checked there
    while stream.read(CHUNK):
        if stream.pos - end > MAX_TRAILER_BYTES:
            raise UsageError(f"{what}: more than {MAX_TRAILER_BYTES} bytes after the archive's end")
    problem = tree_problem(archive.members)
    if problem:
        raise UsageError(f"{what}: {problem}")
    free = shutil.disk_usage(staging_parent).free
    if archive.regular_bytes + DISK_MARGIN > free:
        raise UsageError(
            f"{what}: unpacks to {archive.regular_bytes} bytes, but only {free} are free where it is staged"
        )
    return archive


def is_archive(path: Path) -> bool:
    """Whether `path` starts as a tar stream (compressed or not): its first block a tar header or the end block.
    Reads one block, however large a header claims to be; EOFError or zlib.error when the file is cut short."""
    with open(path, "rb") as raw:
        try:
            block = _open_stream(raw).read(BLOCK)
        except (OSError, lzma.LZMAError):  # not gzip, bzip2 or xz after all
            return False
    return len(block) == BLOCK and (block == bytes(BLOCK) or _checksum_ok(block))


def unpack(archive: Path, dest: Path, what: str) -> str:
    """Unpack `archive` into `dest` (its one top folder stripped); return the commit `git archive` recorded.
    `dest`'s parent belongs to the caller's clean-up scope, so a refusal or a signal leaves nothing behind."""
    staging = dest.parent / (dest.name + ".unpack")
    limits = member_caps()
    try:
        with open(archive, "rb") as raw:  # one open file for both passes
            found = scan(raw, dest.parent, what, limits)
            if os.path.lexists(staging):
                shutil.rmtree(staging)
            os.mkdir(staging)
            write_tree(_Stream(_open_stream(raw), what), found.members, staging, what, limits)
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:  # a corrupt or truncated one, or the host's
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise BuildFailed(f"{what}: no space left while unpacking; what was unpacked is removed") from None
        raise UsageError(f"{what}: cannot unpack ({short(str(e), 160, quote=False)})") from None
    top = top_folder(found.members)
    (staging / os.fsdecode(top[0]) if top else staging).rename(dest)
    shutil.rmtree(staging, ignore_errors=True)
    return found.commit if len(found.commit) == 40 else ""
