"""A GPU variant's locked closure as a PEP 751 pylock.toml (`python3 -m ci.export_pylock`), written by uv.

Against a real index server on 127.0.0.1 holding real files (the host's index for these calls, as PIP_INDEX_URL
points pip at one), and, in the slow tier, the committed lock against the index this host reaches."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from local_servers import wheel_file

from ci import export_pylock
from toolkit.errors import UsageError
from toolkit.lock import file as lock_file
from toolkit.lock import pip_index
from toolkit.spec import bases
from toolkit.spec.catalog import IMAGES_DIR, load_catalog

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed (requirements-dev.txt)")
CATALOG = load_catalog()
AMD = "linux/amd64"


def publish(index, name, version, tag="py3-none-any") -> tuple[str, str]:
    filename, body = wheel_file(name, version, tag)
    index.add(name, filename, body)
    return filename, hashlib.sha256(body).hexdigest()


def installable(index, name, version) -> tuple[str, str]:
    """A wheel an installer accepts (with its RECORD), published: (file name, sha256)."""
    dist, tag = name.replace("-", "_"), "py3-none-any"
    info = f"{dist}-{version}.dist-info"
    members = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n",
        f"{dist}/__init__.py": "",
    }
    members[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*members, f"{info}/RECORD"])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in members.items():
            zf.writestr(path, text)
    filename = f"{dist}-{version}-{tag}.whl"
    index.add(name, filename, buf.getvalue())
    return filename, hashlib.sha256(buf.getvalue()).hexdigest()


def closure_record(*packages) -> dict:
    """A closure record as `build.py lock` writes one (only what the export reads)."""
    return {"packages": {n: {"version": v, "files": dict(files), "via": ["(spec)"]} for n, v, files in packages}}


def every_file(pylock_text: str) -> dict:
    return {n: files for n, (_, files) in export_pylock.files_of(tomllib.loads(pylock_text)).items()}


def test_the_pylock_holds_exactly_the_locked_files_and_digests(index, tmp_path):
    """The index also offers an sdist of a wheel-locked pin and a newer version: neither enters the file; a pin
    locked as its sdist keeps it."""
    wheel = publish(index, "alpha", "1.0")
    index.add("alpha", "alpha-1.0.tar.gz", b"alpha's sdist")
    publish(index, "alpha", "2.0")
    sdist = ("beta-3.1.tar.gz", hashlib.sha256(b"beta's sdist").hexdigest())
    index.add("beta", sdist[0], b"beta's sdist")
    record = closure_record(("alpha", "1.0", [wheel]), ("beta", "3.1", [sdist]))
    variant = CATALOG.resolve("cu13-x86")
    out = tmp_path / "pylock.cu13-x86.toml"
    assert export_pylock.export(variant, AMD, record, pip_index.host_index(), out) == 2
    text = out.read_text()
    assert text.startswith('lock-version = "1.0"\ncreated-by = "uv"\n')
    assert f'requires-python = ">={bases.load_base(variant.base).python_version}"' in text
    assert every_file(text) == {"alpha": dict([wheel]), "beta": dict([sdist])}


def test_uv_installs_from_the_pylock_by_its_digests(index, tmp_path, monkeypatch):
    """The file is one uv reads back: `uv pip install -r` and `uv pip sync` install exactly its distributions into
    an environment of its Python (here this interpreter's, standing in for the base's), and refuse a file whose
    digest is not the one the pylock names."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    real = bases.load_base
    monkeypatch.setattr(bases, "load_base", lambda name: dataclasses.replace(real(name), python_version=here))
    alpha, gamma = installable(index, "alpha", "1.0"), installable(index, "gamma", "0.2")
    record = closure_record(("alpha", "1.0", [alpha]), ("gamma", "0.2", [gamma]))
    installable(index, "gamma", "0.3")
    out = tmp_path / "pylock.cu13-x86.toml"
    export_pylock.export(CATALOG.resolve("cu13-x86"), AMD, record, pip_index.host_index(), out)
    env = dict(os.environ, UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
    for n, command in enumerate((["install", "-r"], ["sync"])):
        venv = tmp_path / f"venv{n}"
        subprocess.run(["uv", "venv", "-q", "-p", sys.executable, str(venv)], check=True, env=env)
        python = str(venv / "bin" / "python")
        uv = ["uv", "pip", *command, str(out), "--preview-features", "pylock", "--python", python]
        proc = subprocess.run(uv + ["--cache-dir", str(tmp_path / "cache")], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        freeze = ["uv", "pip", "freeze", "--python", python]
        listed = subprocess.run(freeze, check=True, env=env, capture_output=True, text=True)
        assert listed.stdout.split() == ["alpha==1.0", "gamma==0.2"]
    out.write_text(out.read_text().replace(gamma[1], "0" * 64))  # a digest the file does not have
    subprocess.run(["uv", "venv", "-q", "-p", sys.executable, str(tmp_path / "venv2")], check=True, env=env)
    uv = ["uv", "pip", "sync", str(out), "--preview-features", "pylock", "--python", str(tmp_path / "venv2/bin/python")]
    proc = subprocess.run(uv + ["--cache-dir", str(tmp_path / "cache2")], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "hash" in proc.stderr.lower(), proc.stderr


def test_a_file_the_index_no_longer_serves_as_locked_writes_nothing(index, tmp_path):
    publish(index, "alpha", "1.0")
    record = closure_record(("alpha", "1.0", [("alpha-1.0-py3-none-any.whl", "0" * 64)]))
    out = tmp_path / "pylock.cu13-x86.toml"
    with pytest.raises(UsageError, match=r"pylock of cu13-x86 linux/amd64: alpha: locked \('1.0'"):
        export_pylock.export(CATALOG.resolve("cu13-x86"), AMD, record, pip_index.host_index(), out)
    assert not out.exists()


def test_each_variant_and_platform_gets_its_own_pep_751_name():
    assert export_pylock.file_name("cu13-x86", AMD, False) == "pylock.cu13-x86.toml"
    assert export_pylock.file_name("cu13", "linux/arm64", True) == "pylock.cu13-arm64.toml"
    names = [name for *_, name in export_pylock.closures([])]
    assert len(names) == len(set(names)) and "pylock.cu13-amd64.toml" in names and "pylock.cu13.toml" not in names


def test_a_variant_without_a_closure_is_refused(tmp_path, capsys):
    assert export_pylock.main([str(tmp_path / "out"), "miles-cpu"]) == 2
    assert "miles-cpu: not a GPU variant" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_gpu_variants_pylock_from_the_real_index_holds_every_locked_file(tmp_path):
    """The committed lock's cu13-x86 closure, exported against the index this host reaches: every distribution,
    every file and sha256 the lock records is in the pylock."""
    v = CATALOG.resolve("cu13-x86")
    python = bases.load_base(v.base).python_version
    lock = lock_file.load(lock_file.lock_path(IMAGES_DIR / "cuda.yaml"), "cuda.lock.json", "cuda")
    record = lock["closure"][v.name][f"py{python} {AMD}"]
    assert export_pylock.main([str(tmp_path), v.name]) == 0
    text = (tmp_path / "pylock.cu13-x86.toml").read_text()
    written = every_file(text)
    for name, pkg in record["packages"].items():
        assert written[name] == pkg["files"], name
        for file, sha in pkg["files"].items():
            assert file in text and sha in text
