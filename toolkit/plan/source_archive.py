"""Unpack a `--source` tarball, which nobody reviewed: bounded, contained, and refused whole or staged whole.

Before anything is written, every member is checked: at most MILES_SOURCE_MAX_FILES members and
MILES_SOURCE_MAX_BYTES bytes in all (environment variables; defaults below), room for them on the disk, names a
file system can hold (at most MAX_NAME_DEPTH folders deep, MAX_PATH_BYTES bytes), and tarfile's `data` filter (no
member or link outside the tree, no absolute link, no device or FIFO); the whole compressed stream is read once,
so a corrupt checksum (gzip's CRC) refuses the archive before it is unpacked. A refusal is one line (exit 2) and
the caller's clean-up scope removes whatever was made.
"""

from __future__ import annotations

import errno
import os
import shutil
import tarfile
import zlib
from pathlib import Path

from toolkit.errors import BuildFailed, UsageError, short

DEFAULT_MAX_FILES = 100_000  # a large checkout (Megatron-LM) has about 10,000
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB unpacked; miles is about 10 MB
DISK_MARGIN = 64 << 20  # bytes left free on the staging disk after unpacking
NAME_MAX = 255  # bytes per path component on Linux file systems
MAX_NAME_DEPTH = 256  # folders in a member's name; the deepest file of Megatron-LM is 8
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux


def limit(variable: str, default: int) -> int:
    """A cap from the environment (a positive integer), else its default."""
    text = os.environ.get(variable, "")
    if not text:
        return default
    if not text.isdigit() or int(text) <= 0:
        raise UsageError(f"{variable}={short(text)}: expected a positive whole number")
    return int(text)


def checked_members(tar: tarfile.TarFile, dest: Path, what: str) -> list:
    """The members, each passed through the `data` filter, within the caps; UsageError naming the first problem."""
    max_files = limit("MILES_SOURCE_MAX_FILES", DEFAULT_MAX_FILES)
    max_bytes = limit("MILES_SOURCE_MAX_BYTES", DEFAULT_MAX_BYTES)
    members: list = []
    total = 0
    for member in tar:
        if len(members) >= max_files:
            raise UsageError(f"{what}: more than {max_files} members (MILES_SOURCE_MAX_FILES raises the cap)")
        total += member.size if member.isreg() else 0
        if total > max_bytes:
            raise UsageError(f"{what}: unpacks to more than {max_bytes} bytes (MILES_SOURCE_MAX_BYTES raises the cap)")
        if any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in member.name.split("/")):
            raise UsageError(f"{what}: member {short(member.name)} has a name longer than {NAME_MAX} bytes")
        if (
            member.name.count("/") > MAX_NAME_DEPTH
            or len(member.name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES
        ):
            raise UsageError(
                f"{what}: member {short(member.name)} is more than {MAX_NAME_DEPTH} folders deep "
                f"or {MAX_PATH_BYTES} bytes long"
            )
        try:
            members.append(tarfile.data_filter(member, str(dest)))
        except tarfile.FilterError as e:
            raise UsageError(f"{what}: refusing member {short(member.name)}: {type(e).__name__}") from None
    if not members:
        raise UsageError(f"{what}: the archive is empty")
    if tar.fileobj is not None:  # to the end of the compressed stream: its checksum is checked there
        while tar.fileobj.read(1 << 20):
            pass
    free = shutil.disk_usage(dest.parent).free
    if total + DISK_MARGIN > free:
        raise UsageError(f"{what}: unpacks to {total} bytes, but only {free} are free where it is staged")
    return members


def unpack(archive: Path, dest: Path, what: str) -> str:
    """Unpack `archive` into `dest` (its one top folder stripped); return the commit `git archive` recorded.
    `dest`'s parent belongs to the caller's clean-up scope, so a refusal or a signal leaves nothing behind."""
    staging = dest.parent / (dest.name + ".unpack")
    try:
        with tarfile.open(archive) as tar:
            members = checked_members(tar, staging, what)
            tar.extractall(staging, members=members, filter="data")
            commit = tar.pax_headers.get("comment", "")
    except (tarfile.TarError, EOFError, OSError, zlib.error, RecursionError) as e:  # a corrupt or truncated one
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise BuildFailed(f"{what}: no space left while unpacking; what was unpacked is removed") from None
        raise UsageError(f"{what}: cannot unpack ({short(str(e), 160, quote=False)})") from None
    entries = list(staging.iterdir())
    top = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink() else staging
    top.rename(dest)
    shutil.rmtree(staging, ignore_errors=True)
    return commit if len(commit) == 40 else ""
