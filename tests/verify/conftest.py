"""Fixtures for the verify/ tests: run the gate runner as a subprocess, write throwaway packages."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import result_lines

REPO = Path(__file__).resolve().parents[2]


def _clean_env(pythonpath=(), extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    env.update(extra or {})
    return env


@pytest.fixture
def run_verify():
    """Run ``python -m verify ARGS`` from the repo root, as an image would (cwd = verify/'s parent)."""

    def run(*args, pythonpath=(), python=sys.executable, env=None, module="verify"):
        return subprocess.run(
            [str(python), "-m", module, *map(str, args)],
            cwd=REPO,
            env=_clean_env(pythonpath, env),
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


@pytest.fixture
def write_tree():
    """write_tree(root, {"pkg/__init__.py": "source", ...}) with dedented contents; returns root."""

    def write(root, files):
        root = Path(root)
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(content))
        return root

    return write


@pytest.fixture
def lines():
    """lines(proc_or_text, status=None, kind=None) -> the matching PASS/FAIL lines."""
    return lambda proc, status=None, kind=None: result_lines(getattr(proc, "stdout", proc), status, kind)
