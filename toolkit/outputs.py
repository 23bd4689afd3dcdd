"""Files a command writes on request (`-o`, `--json`, `--junit`, `--export-cst`): checked before any work starts,
and written whole or not at all.

A path that names a folder, lies in a folder that does not exist or cannot be written is bad usage (exit 2),
found before a build or a gate runs. The write itself goes to a temporary file beside the target, renamed over
it when complete, so a full disk leaves the old file (or none), never half of the new one. A target that exists
and is not a regular file (/dev/stdout, a pipe) is written directly.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from toolkit.errors import BuildFailed, UsageError, short


def check_output(option: str, path) -> None:
    """UsageError (exit 2) unless `path` can be written as a file (a name the file system cannot hold included)."""
    where = f"{option} {short(str(path))}"
    try:
        _check_output(Path(path), where)
    except OSError as e:  # a name too long, a loop of links
        raise UsageError(f"{where}: {e.strerror or type(e).__name__}") from None


def _check_output(p: Path, where: str) -> None:
    if p.is_dir():
        raise UsageError(f"{where}: is a folder; name a file")
    parent = p.parent
    if not parent.is_dir():
        raise UsageError(f"{where}: no folder {short(str(parent))}")
    if p.exists() and not p.is_file():
        return  # a device or a pipe: written directly
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{where}: not writable")


def write_output(path, data) -> None:
    """Write `data` (text or bytes) to `path` whole: a temporary file beside it, renamed over it once complete."""
    p = Path(path)
    data = data.encode() if isinstance(data, str) else data
    try:
        if p.exists() and not p.is_file():
            with open(p, "wb") as f:
                f.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name[:40]}.", dir=p.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, p)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
        reason = "no space left on the device" if full else (e.strerror or type(e).__name__)
        raise BuildFailed(f"cannot write {short(str(path))}: {reason}; nothing was written") from None
