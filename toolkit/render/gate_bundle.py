"""What the gates put into an image, and that payload as bytes.

The payload is the whole ``verify/`` package (the stdlib gate runner, every module of it and of its gate kinds
``verify/kinds/``, no allow list: nothing host-side lives there), its ``probes/`` scripts, and ``gates.json``.
``payload_files()`` is the one list; the build context stages it from disk (``gates/``), ``build.py verify`` puts
it into a container as a tar, and the container-structure-test export embeds the runner as a zip.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER_DIR = ROOT / "verify"
PROBES_DIR = RUNNER_DIR / "probes"


def probe_problem(name: str) -> str | None:
    """Why ``verify/probes/NAME`` cannot be shipped as a probe, or None: it must be a regular file of the repository
    (not a link, to a file inside it or out of it, and not under a folder that is one)."""
    path = PROBES_DIR / name
    if "/" in name or name in ("", ".", ".."):
        return f"{name!r} is not a file name of verify/probes/"
    if PROBES_DIR.is_symlink() or PROBES_DIR.resolve() != PROBES_DIR:
        return "verify/probes/ is a link: probes are regular files of the repository"
    if path.is_symlink():
        return f"verify/probes/{name} is a link: a probe is a regular file of the repository"
    if not path.is_file():
        return f"verify/probes/{name} is not a file of the repository"
    return None


def payload_files() -> dict[str, Path]:
    """``{"verify/config.py": Path, "verify/kinds/imports.py": Path, ..., "probes/x.py": Path}``, relative to the
    folder the gates run from.

    Probes are scripts that command gates run with the image's python (cwd: that folder). Unlike the runner they may
    use the image's packages; they travel beside it and are never imported by it."""
    from toolkit.errors import UsageError

    files = {f"verify/{p.relative_to(RUNNER_DIR).as_posix()}": p for p in sorted(RUNNER_DIR.rglob("*.py"))}
    files = {name: p for name, p in files.items() if not name.startswith("verify/probes/")}
    for name, path in files.items():
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"{name}: the gate runner's files are regular files of the repository, not links")
    for path in sorted(PROBES_DIR.glob("*.py")):
        problem = probe_problem(path.name)
        if problem is not None:
            raise UsageError(f"{problem}; refusing to ship it in the gate bundle")
        files[f"probes/{path.name}"] = path
    return files


def config_text(gates: dict) -> str:
    """``gates.json`` as the runner reads it: the spec's ``gates`` mapping, in stable bytes (it is hashed)."""
    return json.dumps(gates, indent=2, sort_keys=True) + "\n"


def payload_bytes() -> dict[str, bytes]:
    """``payload_files()`` read into memory."""
    return {name: path.read_bytes() for name, path in payload_files().items()}


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar of ``{path: bytes}`` (files 0644, owned by root; parent folders are made on extraction)."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def runner_zip() -> bytes:
    """The runner's modules (no probes) as a deflated zip with fixed timestamps: same sources, same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in payload_files().items():
            if name.startswith("verify/"):
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
    return buf.getvalue()
