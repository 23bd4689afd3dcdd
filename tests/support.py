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


def git(repo, *args, check=True):
    """git in `repo` under a throwaway identity; the CompletedProcess (text output)."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(repo), *args],
                          capture_output=True, text=True, check=check)


def git_init(path):
    """An empty repository at `path` (created)."""
    path.mkdir()
    git(path, "init", "-q")
    return path
