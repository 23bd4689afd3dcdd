"""The wheels of `--source wheels=DIR`, checked before anything is staged: an untrusted folder whose file names reach
a RUN line and whose content reaches the image.

Every entry whose name ends in `.whl` must be a plain file (not a link, not a folder), its name a plain file name
(toolkit/plan/artifacts.py: no separator, no control character) that parses as a wheel's, and its content a zip archive
that reads whole (every member's CRC) with a `.dist-info/METADATA` naming the distribution and version its file
name says. Anything else is refused with one line naming the file; nothing is skipped silently.
"""

from __future__ import annotations

import email.parser
import stat
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from toolkit.errors import UsageError, short
from toolkit.plan.artifacts import file_name_problem, wheel_version

MAX_WHEEL_BYTES = 4 << 30  # no wheel of any family comes near it (torch's is about 1 GiB)
MAX_METADATA_BYTES = 1 << 20


def _refuse(name: str, problem: str) -> UsageError:
    return UsageError(f"--source wheels: {short(name)}: {problem}")


def wheel_entries(folder: Path) -> list:
    """(file name, canonical distribution) of every wheel in `folder`, each checked as above; sorted by name."""
    out = []
    for entry in sorted(folder.iterdir()):
        if not entry.name.lower().endswith(".whl"):
            continue
        out.append((entry.name, check_wheel(entry)))
    return out


def check_wheel(path: Path) -> str:
    """The canonical distribution name of the wheel at `path`, or UsageError saying why it is not one."""
    name = path.name
    problem = file_name_problem(name)
    if problem:
        raise _refuse(name, problem)
    parsed = wheel_version(name)
    if parsed is None:
        raise _refuse(name, "not a wheel file name (NAME-VERSION-PYTHON-ABI-PLATFORM.whl)")
    try:
        info = path.lstat()
    except OSError as e:
        raise _refuse(name, e.strerror or type(e).__name__) from None
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(name, "a link; the folder's wheels must be files in it, not links to elsewhere")
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(name, "not a file")
    if info.st_size > MAX_WHEEL_BYTES:
        raise _refuse(name, f"larger than {MAX_WHEEL_BYTES} bytes")
    dist, version = parsed
    _check_content(path, name, dist, version)
    return dist


def _check_content(path: Path, name: str, dist: str, version: Version) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            if bad is not None:
                raise _refuse(name, f"corrupt: member {short(bad)} fails its CRC")
            metadata = [i for i in z.infolist() if _is_metadata(i.filename)]
            if len(metadata) != 1:
                raise _refuse(name, "not a wheel: no single .dist-info/METADATA")
            if metadata[0].file_size > MAX_METADATA_BYTES:
                raise _refuse(name, f"METADATA larger than {MAX_METADATA_BYTES} bytes")
            text = z.read(metadata[0]).decode("utf-8", "replace")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError, ValueError) as e:
        raise _refuse(name, f"not a readable zip archive ({type(e).__name__})") from None
    headers = email.parser.Parser().parsestr(text, headersonly=True)
    try:
        said = canonicalize_name(headers.get("Name") or ""), Version(headers.get("Version") or "")
    except InvalidVersion:
        raise _refuse(name, "its METADATA has no valid Version") from None
    if said != (dist, version):
        raise _refuse(name, f"its METADATA says {said[0]} {said[1]}, its file name {dist} {version}")


def _is_metadata(member: str) -> bool:
    parts = member.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA"
