"""The gate runner as bytes, for getting it into an image that does not have it.

``tar_bytes()`` is what docker's ``put_archive`` takes; ``zip_bytes()`` is embedded (base64) in the
container-structure-test config. Only the runner's own modules go in, never __pycache__.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
import zipfile
from typing import Dict

from . import PACKAGE_DIR

RUNNER_MODULES = ("__init__.py", "__main__.py", "checks.py", "config.py", "locate.py", "report.py", "result.py",
                  "runner.py", "sigsource.py")


PROBES_DIR = os.path.join(PACKAGE_DIR, "probes")


def probe_files() -> Dict[str, bytes]:
    """``{"probes/x.py": b"..."}``: scripts that command gates run with the image's python (cwd: the gates folder).
    Unlike the runner they may use the image's packages; they travel beside it, never imported by it."""
    out = {}
    for name in sorted(os.listdir(PROBES_DIR)):
        if name.endswith(".py"):
            with open(os.path.join(PROBES_DIR, name), "rb") as fh:
                out["probes/" + name] = fh.read()
    return out


def config_text(gates: dict) -> str:
    """``gates.json`` as the runner reads it: the spec's ``gates`` mapping, in stable bytes (it is hashed)."""
    return json.dumps(gates, indent=2, sort_keys=True) + "\n"


def runner_files(everything: bool = False) -> Dict[str, bytes]:
    """``{"verify/checks.py": b"..."}``; ``everything`` adds the host-side modules (overlays, cst, ...)."""
    names = sorted(n for n in os.listdir(PACKAGE_DIR) if n.endswith(".py")) if everything else RUNNER_MODULES
    out = {}
    for name in names:
        with open(os.path.join(PACKAGE_DIR, name), "rb") as fh:
            out["verify/" + name] = fh.read()
    return out


def tar_of(files: Dict[str, bytes]) -> bytes:
    """A tar of ``{path: bytes}`` (files 0644, owned by root; parent folders are made on extraction)."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tar_bytes(everything: bool = False) -> bytes:
    """``verify/`` as a tar, to extract into any directory of an image."""
    return tar_of(runner_files(everything))


def zip_bytes() -> bytes:
    """The runner modules as a deflated zip with fixed timestamps (same sources, same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in runner_files().items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()
