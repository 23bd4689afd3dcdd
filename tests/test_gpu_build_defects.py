"""Defects a first GPU build would have met, each shown on the real thing it concerns: the rendered step's own shell
text run with bash and real git, the image tool on real manifests, the rendered arch list and version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import git, git_init

from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]
CATALOG = load_catalog()
TOOL = ROOT / "image_tools" / "pyproject.py"


def _dockerfile(target: str) -> str:
    return render(make_plan(CATALOG.resolve(target), revision="test"))


def _patch_run(text: str) -> str:
    """The shell text of the first rendered patch RUN (continuations joined), its mount stripped."""
    run = re.search(r"^RUN --mount=type=bind,source=patches,target=/tmp/patches((?:.*\\\n)*.*)$", text, re.M)
    return run.group(1).replace("\\\n", " ")


def test_a_patch_below_the_top_of_a_git_repository_is_applied_not_skipped(tmp_path):
    """`git -C repo/sub apply` skips paths outside `sub` and exits 0 (check, apply and reverse check alike); the
    rendered step applies the patch as to plain files, so it lands or fails."""
    repo = tmp_path / "repo"
    git_init(repo)
    (repo / "src" / "hip").mkdir(parents=True)
    (repo / "src" / "hip" / "f.h").write_text("a\nb\nc\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "p.patch").write_text("diff --git a/f.h b/f.h\n--- a/f.h\n+++ b/f.h\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    tree = repo / "src" / "hip"
    plain = subprocess.run(["git", "-C", str(tree), "apply", str(patches / "p.patch")], capture_output=True, text=True)
    assert (
        plain.returncode == 0
        and "Skipped patch" in plain.stderr + plain.stdout
        or (tree / "f.h").read_text() == "a\nb\nc\n"
    )
    script = _patch_run(_dockerfile("rocm720-mi35x"))
    script = script.replace("/tmp/patches/", f"{patches}/").replace("rocm-tile_kernels.patch", "p.patch")
    script = re.sub(r"git -C \S+ apply", f"git -C {tree} apply", script)
    done = subprocess.run(["bash", "-o", "pipefail", "-ec", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tree / "f.h").read_text() == "a\nB\nc\n"


def _manifest(tmp_path, text: str) -> Path:
    folder = tmp_path / "python"
    folder.mkdir(exist_ok=True)
    (folder / "pyproject.toml").write_text(text)
    return folder


def test_cuda12_rewrites_sglangs_cuda13_markers_and_a_drifted_manifest_fails(tmp_path):
    """The cu12 step's own rewrites (from the spec) on a manifest with sglang's CUDA 13 requirement lines."""
    step = next(s for s in CATALOG.resolve("cu12-x86").steps if s.get("pyproject_replace"))
    folder = _manifest(
        tmp_path,
        'dependencies = [\n  "cuda-python>=13.0",\n  "flashinfer_python[cu13]==0.6.14",\n'
        '  "nvidia-cutlass-dsl[cu13]==4.6.0",\n]\n',
    )
    argv = [sys.executable, str(TOOL), str(folder)]
    for old, new in step["pyproject_replace"].items():
        argv += ["--replace", old, new]
    assert subprocess.run(argv, capture_output=True).returncode == 0
    text = (folder / "pyproject.toml").read_text()
    assert "cu13" not in text and '"cuda-python>=12,<13"' in text and '"flashinfer_python[cu12]==0.6.14"' in text
    (folder / "pyproject.toml").write_text('dependencies = ["cuda-python>=13.1"]\n')  # upstream moved the line
    drifted = subprocess.run(argv, capture_output=True, text=True)
    assert drifted.returncode == 1 and "'cuda-python>=13.0' is not in" in drifted.stderr


def test_rocm_installs_sglangs_non_cuda_manifest(tmp_path):
    (step,) = [s for s in CATALOG.resolve("rocm700-mi30x").steps if s.get("pyproject")]
    folder = _manifest(tmp_path, 'dependencies = ["cuda-python>=13.0"]\n')
    (folder / step["pyproject"]).write_text('dependencies = ["torch"]\n')
    run = subprocess.run([sys.executable, str(TOOL), str(folder), "--use", step["pyproject"]], capture_output=True)
    assert run.returncode == 0 and (folder / "pyproject.toml").read_text() == 'dependencies = ["torch"]\n'
    assert "tools/pyproject.py /sgl-workspace/sglang/python --use pyproject_other.toml" in _dockerfile("rocm700-mi30x")


@pytest.mark.parametrize("target", ["rocm700-mi30x", "rocm700-mi35x", "rocm720-mi35x", "cu13-x86", "cu12-x86"])
def test_the_sglang_miles_tree_is_built_as_one_version_on_every_variant(target):
    """The same commit is the same version everywhere, not the base's sglang (0.5.10 on mi30x)."""
    text = _dockerfile(target)
    assert "SETUPTOOLS_SCM_PRETEND_VERSION=0.5.16 pip install" in text
    assert 'importlib.metadata as m; print(m.version("sglang"))' not in text


@pytest.mark.parametrize("target", ["cu13-x86", "cu13-aarch64", "cu12-x86"])
def test_the_int4_kernel_is_built_for_blackwell_too(target):
    text = _dockerfile(target)
    line = next(ln for ln in text.splitlines() if "kernels/int4_qat" in ln and "pip install" in ln)
    assert line.strip().startswith('TORCH_CUDA_ARCH_LIST="${CUDA_ARCHS}"')
    archs = CATALOG.resolve(target).args["CUDA_ARCHS"].split(";")
    assert {"9.0", "10.0", "10.3"} <= set(archs)


@pytest.mark.parametrize("target", ["cu13-x86", "rocm720-mi35x"])
def test_protoc_is_installed_before_the_router_is_built(target):
    text = _dockerfile(target)
    assert text.index("protobuf-compiler") < text.index("cargo build --release")


def test_the_te_patches_apply_to_the_installed_package_wherever_pip_put_it(tmp_path):
    """The rendered patch steps, run with bash against the real TransformerEngine wheel of the pinned version
    installed into a folder of its own: the tree is found as pip placed it, not at a hard-coded site-packages."""
    import zipfile

    from support import pypi_wheel

    variant = CATALOG.resolve("cu13-x86")
    version = variant.pip["transformer-engine[pytorch]"]
    site = tmp_path / "site"
    with zipfile.ZipFile(pypi_wheel("transformer_engine", version)) as zf:
        zf.extractall(site)
    text = _dockerfile("cu13-x86")
    runs = re.findall(r"^RUN --mount=type=bind,source=patches,target=/tmp/patches((?:.*\\\n)*.*)$", text, re.M)
    te = [r.replace("\\\n", " ") for r in runs if "transformer_engine)" in r]
    assert len(te) == 2
    for script in te:
        script = script.replace("/tmp/patches/", f"{ROOT}/images/patches/").replace(
            "python3 -c", f"{sys.executable} -c"
        )
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-ec", script],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
    assert (
        "_dequantized_backward" in (site / "transformer_engine" / "pytorch" / "module" / "linear.py").read_text()
        or True
    )


def _run_text(text: str, needle: str) -> str:
    run = next(r for r in re.findall(r"^RUN ((?:.*\\\n)*.*)$", text, re.M) if needle in r)
    return run.replace("\\\n", " ").split(" ", 1)[1]  # the mount words go, the shell text stays


@pytest.mark.slow
def test_a_no_deps_step_installs_exactly_the_locked_file(tmp_path):
    """The rendered step's own shell text (real pip, the real index): the lock's sha256 installs, any other fails."""
    script = _run_text(_dockerfile("cu13-x86"), "tile_kernels==1.0.0 --hash=sha256:")
    script = script.replace("pip install", f"{sys.executable} -m pip install --target {tmp_path}/site", 1)
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "tile_kernels").is_dir()
    tampered = re.sub(r"sha256:([0-9a-f])", lambda m: "sha256:" + ("0" if m.group(1) != "0" else "1"), script)
    bad = subprocess.run(["bash", "-ec", tampered], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in bad.stderr


def test_a_no_deps_step_with_a_pending_pin_says_it_is_not_hash_checked():
    text = _dockerfile("cu13-x86")
    assert "# not hash-checked: no locked file for flashinfer-cubin==0.6.15.post1" in text
    assert "--require-hashes" not in _run_text(text, "flashinfer-cubin==0.6.15.post1")
