"""cu13-x86 built whole on this CPU host: its own Dockerfile on a stand-in base (`build.py build --stand-in-base`),
its gate step unchanged. Every gate runs; the only failures allowed are those a skipped step or a recorded
difference names, and a broken environment still fails the build with exit 1, naming what broke."""

import json
import re
import tarfile

import pytest

from tests.support import MEGATRON_SNAPSHOT, SNAPSHOT, run_build_py

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SOURCES = ("--source", f"miles={SNAPSHOT}", "--source", f"megatron_lm={MEGATRON_SNAPSHOT}")


def image_report(client, image) -> dict:
    """The gate report the image keeps (the build's own, also when its gate step came from the cache)."""
    return json.loads(client.containers.run(image.id, ["cat", "/usr/share/miles-gates/report.json"], remove=True))


def test_cu13_x86_builds_on_its_stand_in_and_only_skipped_steps_and_differences_excuse_a_gate():
    import docker

    proc = run_build_py("build", "--target", "cu13-x86", "--stand-in-base", *SOURCES, timeout=5400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for line in (
        "stand-in: not built here: pip flash-attn (compiles native code",
        "stand-in: differs from base: OS: Debian",
    ):
        assert line in out
    client = docker.from_env()
    image = client.images.get("miles:cu13-x86-standin")
    labels = image.labels
    assert labels["io.miles.stand-in"].startswith("miles-standin:cu13-x86-")
    assert "differs from base: Python: this host's CPython 3.12" in labels["io.miles.stand-in.differences"]
    assert labels["io.miles.variant"] == "cu13-x86"
    report = image_report(client, image)
    checks = {(c["kind"], c["target"]): c for c in report["checks"]}
    assert report["failed"] == 0 and not [c for c in report["checks"] if c["status"] == "FAIL"]
    # Gates of steps that built pass; gates of skipped ones say which step, and a difference says what it is.
    assert checks[("import", "sgl_kernel")]["status"] == "PASS"
    assert checks[("import", "miles.backends.fsdp_utils")]["status"] == "PASS"
    assert checks[("import", "flash_attn")]["excused"].startswith("not built here: pip flash-attn")
    assert checks[("provenance", "sglang")]["excused"].startswith("differs from base: sglang:")
    assert sum(c["status"] == "PASS" for c in report["checks"]) > 100


def test_a_broken_environment_fails_the_stand_in_build_naming_what_broke(tmp_path):
    """Megatron-LM whose `megatron.core` raises OSError at import (as TransformerEngine does without a driver), and a
    pin that conflicts (click below what typer and others require): exit 1, each named, no tag moved."""
    import docker

    with tarfile.open(MEGATRON_SNAPSHOT) as tar:
        tar.extractall(tmp_path / "mlm", filter="data")
    (root,) = [p for p in (tmp_path / "mlm").iterdir() if p.is_dir()] or [tmp_path / "mlm"]
    core = root / "megatron" / "core" / "__init__.py"
    core.write_text(
        "raise OSError('libcuda.so.1: cannot open shared object file (a planted breakage)')\n" + core.read_text()
    )
    client = docker.from_env()
    before = client.images.get("miles:cu13-x86-standin").id if client.images.list("miles:cu13-x86-standin") else None
    proc = run_build_py(
        "build", "--target", "cu13-x86", "--stand-in-base", "--source", f"miles={SNAPSHOT}",
        "--source", f"megatron_lm={root}", "--set", "pip.click=7.1.2", timeout=5400,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-6000:]
    assert re.search(r"FAIL\s+\S*import\s+megatron\.core\s+OSError: libcuda\.so\.1", out), out[-6000:]
    assert re.search(r"FAIL\s+pip-check\s+\S+\s+\S+ \S+ has requirement click", out), out[-6000:]
    after = client.images.get("miles:cu13-x86-standin").id if client.images.list("miles:cu13-x86-standin") else None
    assert after == before  # a failed build moves no tag
