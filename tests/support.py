"""Helpers shared by the toolkit's tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT.parent / "shared" / "upstream"


def _miles_commit() -> str:
    from toolkit.spec.catalog import load_catalog

    return load_catalog().resolve("miles-cpu").components["miles"]["ref"]


def snapshot_of(commit: str) -> Path | None:
    """The `git archive` of `commit` beside the checkout (its pax header names the commit), or None. A miles bump
    is one edit of images/layers/miles.yaml plus the snapshot of the new commit here."""
    import tarfile

    for path in sorted(UPSTREAM.glob("*.tar.gz")):
        with tarfile.open(path) as tar:
            if tar.pax_headers.get("comment") == commit:
                return path
    return None


# The miles commit every family pins, read from the catalog, and its upstream snapshot (the README's main command
# builds from it).
MILES_COMMIT = _miles_commit()
SNAPSHOT = snapshot_of(MILES_COMMIT) or UPSTREAM / f"miles-{MILES_COMMIT[:9]}.tar.gz"


def _megatron_commit() -> str:
    from toolkit.spec.catalog import load_catalog

    return load_catalog().resolve("miles-cpu").components["megatron_lm"]["ref"]


# The Megatron-LM commit miles-cpu builds (its lock's), and its snapshot: every miles-cpu build of the tests passes
# both trees as `--source`, as the README's main command does.
MEGATRON_COMMIT = _megatron_commit()
MEGATRON_SNAPSHOT = snapshot_of(MEGATRON_COMMIT) or UPSTREAM / f"megatron-lm-{MEGATRON_COMMIT[:9]}.tar.gz"


def run_build_py(*args, cwd=ROOT, env=None, timeout=1800):
    """Run build.py as a user would; return the CompletedProcess (text stdout/stderr)."""
    return subprocess.run(
        [sys.executable, "build.py", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def edit_spec(project, family, fn):
    """project/images/FAMILY.yaml changed in place: parsed, fn(data), dumped (a project copy's own spec)."""
    import yaml

    path = Path(project) / "images" / f"{family}.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def edited_spec(images_dir, family, fn):
    """images_dir/FAMILY.yaml: the project's spec of that family, parsed, changed in place by fn(data), dumped."""
    import shutil

    import yaml

    data = yaml.safe_load((ROOT / "images" / f"{family}.yaml").read_text())
    fn(data)
    path = Path(images_dir) / f"{family}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    lock = ROOT / "images" / f"{family}.lock.json"  # the pins of its tracked components, beside it as in images/
    if lock.is_file():
        shutil.copyfile(lock, Path(images_dir) / lock.name)
    return path


def git(repo, *args, check=True):
    """git in `repo` under a throwaway identity; the CompletedProcess (text output)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=check,
    )


def git_init(path):
    """An empty repository at `path` (created)."""
    path.mkdir()
    git(path, "init", "-q")
    return path


SGLANG_WHEELS = ROOT / ".cache" / "sglang-wheels"
WHEELS = ROOT / ".cache" / "wheels"


def pypi_wheel(name: str, version: str, folder: Path = WHEELS) -> Path:
    """The PyPI wheel of name==version, downloaded into `folder` (under .cache) when missing; skips the calling
    test, saying why, only when the download is impossible."""
    import pytest

    pattern = "%s-%s-*.whl" % (name.replace("-", "_"), version)
    found = sorted(folder.glob(pattern))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        run = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "%s==%s" % (name, version), "-d", str(folder)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        found = sorted(folder.glob(pattern))
        if not found:
            last = (run.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip("cannot download %s==%s (pip download --no-deps failed: %s)" % (name, version, last))
    return found[-1]


def sglang_wheel(version: str) -> Path:
    return pypi_wheel("sglang", version, SGLANG_WHEELS)


def remove_images(client, *refs):
    """Remove test images by tag, each one that still exists (clean-up in a `finally`)."""
    for ref in refs:
        try:
            client.images.remove(ref, noprune=True)
        except Exception:  # already gone
            pass


def wheel_bytes(name: str, version: str, where: str = "") -> bytes:
    """A real (tiny, pure) wheel of `name` `version`: a module of that name saying `where` it came from, METADATA,
    WHEEL and a RECORD with every member's digest (pip installs it)."""
    import base64
    import hashlib
    import io
    import zipfile

    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"WHERE = {where!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for member, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        record += f"{member},sha256={digest},{len(body)}\n"
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for member, body in files.items():
            z.writestr(member, body)
    return out.getvalue()


def no_engine(tmp_path, **extra) -> dict:
    """The environment with DOCKER_HOST at a socket nobody serves: a command that asks for an engine gets none."""
    return dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", **extra)


def one_line(proc, code: int, *needles: str) -> str:
    """Exit `code` and exactly one line on stderr (no traceback) holding every needle; returns that line."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def result_lines(output: str, status=None, kind=None) -> list:
    """The runner's PASS/FAIL result lines in `output`, filtered by status and gate kind."""
    out = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("PASS", "FAIL"):
            if (status is None or parts[0] == status) and (kind is None or parts[1] == kind):
                out.append(line)
    return out


def passing_report(gates: dict, nonce: str) -> dict:
    """A gate report that proves a passing run of `gates` with `nonce` on this CPython (one passing check per
    declared item): what an engine stand-in hands the build as its gate step's report."""
    from verify.config import from_dict
    from verify.kinds import KINDS
    from verify.report import to_json
    from verify.result import CheckResult

    cfg = from_dict(gates, "gates")
    results = [CheckResult(k.kind, k.target(i), True, "ok") for k in KINDS for i in cfg[k.key]]
    return to_json(results, nonce)
