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

RUNNER_DIR = Path(__file__).resolve().parents[2] / "verify"
PROBES_DIR = RUNNER_DIR / "probes"


def payload_files() -> dict[str, Path]:
    """``{"verify/config.py": Path, "verify/kinds/imports.py": Path, ..., "probes/x.py": Path}``, relative to the
    folder the gates run from.

    Probes are scripts that command gates run with the image's python (cwd: that folder). Unlike the runner they may
    use the image's packages; they travel beside it and are never imported by it."""
    files = {f"verify/{p.relative_to(RUNNER_DIR).as_posix()}": p for p in sorted(RUNNER_DIR.rglob("*.py"))}
    files = {name: p for name, p in files.items() if not name.startswith("verify/probes/")}
    files.update({f"probes/{p.name}": p for p in sorted(PROBES_DIR.glob("*.py"))})
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
