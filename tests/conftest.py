"""Shared fixtures: a real Docker engine, the smoke image, and throwaway copies of the project to break."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import running_tests
from support import ROOT, run_build_py

from toolkit.errors import UsageError
from toolkit.render.context import PROJECT_ITEMS
from toolkit.strict import env_flag


def engine_required() -> bool:
    """MILES_REQUIRE_ENGINE (CI sets it), read as every boolean the toolkit reads is (toolkit/strict.py)."""
    try:
        return env_flag("MILES_REQUIRE_ENGINE")
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", ".pytest_cache", "tests", "bench")


def _engine_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=10).ping()
        return subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0
    except Exception:
        return False


@pytest.hookimpl(trylast=True)  # after pytest's own terminal reporter exists
def pytest_configure(config):
    running_tests.register(config)  # which test is still running, when none ended for a while


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # The engine's state (tags, builders, the smoke image) is shared: its tests run one at a time, on one worker
    # (`--dist loadgroup`, pytest.ini); the rest spread over the others.
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("engine"))
    required = engine_required()  # read whether or not an engine answers: a bad value is refused either way
    if _engine_answers():
        return
    if required:
        raise pytest.UsageError("MILES_REQUIRE_ENGINE is true but no Docker engine with buildx answers")
    skip = pytest.mark.skip(reason="no Docker engine with buildx answers (run ci/setup.sh)")
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def project_copy(tmp_path):
    """A copy of the project to break on purpose; it shares the wheelhouse cache so builds stay fast."""
    dest = tmp_path / "project"
    dest.mkdir()
    for item in PROJECT_ITEMS:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=IGNORE)
        else:
            shutil.copy2(src, dest / item)
    (ROOT / ".cache").mkdir(exist_ok=True)
    (dest / ".cache").symlink_to(ROOT / ".cache")
    return dest


@pytest.fixture
def images_dir(tmp_path, monkeypatch):
    """An `images/` folder with no family in it, only the project's layers (the shared tables families extend), for
    spec files to load in-process: the working directory is its parent, so a spec loaded as `images/NAME.yaml`
    carries the same label (in its errors, in the Dockerfile) as the project's own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "images").mkdir()
    shutil.copytree(ROOT / "images" / "layers", tmp_path / "images" / "layers")
    return Path("images")


@pytest.fixture
def index(monkeypatch):
    """A local package index (tests/local_servers.py) as pip's and uv's default index (PIP_INDEX_URL); a module that
    needs it set up otherwise defines its own `index`."""
    from local_servers import LocalIndex

    idx = LocalIndex()
    monkeypatch.setenv("PIP_INDEX_URL", idx.url)
    yield idx
    idx.server.stop()


@pytest.fixture(scope="session")
def docker_client():
    import docker

    return docker.from_env(timeout=600)


@pytest.fixture(scope="session")
def smoke_image(docker_client):
    """The smoke image, built once per session through the real CLI (render, BuildKit, gates)."""
    proc = run_build_py("--target", "smoke")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return "miles:smoke"
