"""Helpers shared by the toolkit's tests (fixtures live in conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_build_py(*args, cwd=ROOT, env=None, timeout=1800):
    """Run build.py as a user would; return the CompletedProcess (text stdout/stderr)."""
    return subprocess.run([sys.executable, "build.py", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
