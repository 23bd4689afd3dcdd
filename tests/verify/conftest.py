"""Fixtures for the verify/ tests: run the gate runner as a subprocess, write throwaway packages."""

import os
import shutil
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


SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture(scope="session")
def bundle(tmp_path_factory):
    """The gate bundle as an image gets it (verify/ and probes/ side by side), its probes joined by the test
    programs of tests/verify/scripts/ (`probes/say.py`, `probes/argv.py`): a command gate runs only a probe of the
    bundle the runner came with."""
    from toolkit.render.gate_bundle import payload_bytes

    root = tmp_path_factory.mktemp("bundle")
    for name, data in payload_bytes().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for script in SCRIPTS.glob("*.py"):
        shutil.copyfile(script, root / "probes" / script.name)
    return root


@pytest.fixture
def run_verify():
    """Run ``python -m verify ARGS`` from the repo root, as an image would (cwd = verify/'s parent); ``cwd=bundle``
    runs the bundle's own copy instead (command gates run the probes of the runner's bundle)."""

    def run(*args, pythonpath=(), python=sys.executable, env=None, module="verify", cwd=REPO):
        return subprocess.run(
            [str(python), "-m", module, *map(str, args)],
            cwd=cwd,
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
