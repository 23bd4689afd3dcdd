"""Hostile and careless input, round two, no engine needed: `--source` archives are bounded and contained, source
trees keep their links, values that can never build are refused at validation, template partials stay in the
repository, output paths are checked before any work, and every refusal is one line that never echoes a whole
value or breaks on a newline.

`build` runs with DOCKER_HOST pointing at no engine: staging comes before the engine is asked, so a bad `--source`
is refused (exit 2) on a machine without one; a value that got past validation would reach the engine (exit 3).
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from support import no_engine, one_line, run_build_py

from toolkit.errors import UsageError
from toolkit.plan.sources import stage_local, tree_digest


def left_under(project: Path) -> list:
    """Whatever a command left in the project's build/ folder (empty per-target folders aside)."""
    build = project / "build"
    return (
        sorted(str(p.relative_to(build)) for p in build.rglob("*") if not p.is_dir() or any(p.iterdir()))
        if (build.exists())
        else []
    )


# ---- `--source` archives nobody reviewed: bounded, contained, refused whole with one line, nothing left.


def _tar(path: Path, members) -> Path:
    """A tarball of (TarInfo, bytes or None) pairs, written as given (tarfile.add would normalise them)."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _member(name, kind=tarfile.REGTYPE, data=b"x = 1\n", link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info, (data if kind == tarfile.REGTYPE else None)


ARCHIVES = {
    "dot-dot member": ([_member("miles/ok.py"), _member("miles/../../escape.py")], "refusing member"),
    "absolute symlink": ([_member("miles/ok.py"), _member("miles/etc", tarfile.SYMTYPE, link="/etc")], "refusing"),
    "hard link outside": ([_member("miles/ok.py"), _member("miles/pw", tarfile.LNKTYPE, link="/etc/passwd")], "refus"),
    "device": ([_member("miles/ok.py"), _member("miles/dev", tarfile.CHRTYPE)], "refusing member"),
    "fifo": ([_member("miles/ok.py"), _member("miles/fifo", tarfile.FIFOTYPE)], "refusing member"),
    "empty": ([], "empty"),
    "name over 255 bytes": ([_member("miles/" + "n" * 300 + ".py")], "longer than 255 bytes"),
    "too many members": ([_member(f"miles/f{i}.py") for i in range(60)], "more than 50 members"),
    "too many bytes": ([_member("miles/big.py", data=b"#" * 5000)], "more than 4000 bytes"),
}


@pytest.mark.parametrize("case", sorted(ARCHIVES))
def test_a_hostile_source_archive_is_refused_with_one_line_and_nothing_left(project_copy, tmp_path, case):
    members, needle = ARCHIVES[case]
    archive = _tar(tmp_path / "src.tar.gz", members)
    env = dict(no_engine(tmp_path), MILES_SOURCE_MAX_FILES="50", MILES_SOURCE_MAX_BYTES="4000")
    proc = run_build_py("build", "--target", "miles-cpu", "--source", f"miles={archive}", cwd=project_copy, env=env)
    one_line(proc, 2, "--source miles=", needle)
    assert left_under(project_copy) == []
    assert not (tmp_path / "escape.py").exists() and not (project_copy / "escape.py").exists()


def test_an_archive_that_does_not_fit_on_the_disk_is_refused_before_unpacking(project_copy, tmp_path):
    build = project_copy / "build"
    build.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(build)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        archive = _tar(
            tmp_path / "src.tar.gz", [_member(f"miles/f{i}.bin", data=os.urandom(1 << 20)) for i in range(3)]
        )
        proc = run_build_py(
            "build", "--target", "miles-cpu", "--source", f"miles={archive}", cwd=project_copy, env=no_engine(tmp_path)
        )
        one_line(proc, 2, "--source miles=", "are free where it is staged")
        assert left_under(project_copy) == []
    finally:
        subprocess.run(["umount", str(build)], check=True)


def test_the_caps_are_overridable_and_checked(project_copy, tmp_path):
    archive = _tar(tmp_path / "src.tar.gz", [_member(f"miles/f{i}.py") for i in range(60)])
    env = dict(no_engine(tmp_path), MILES_SOURCE_MAX_FILES="100")
    proc = run_build_py("build", "--target", "miles-cpu", "--source", f"miles={archive}", cwd=project_copy, env=env)
    one_line(proc, 3, "no Docker engine answers")  # staged within the raised cap; stopped only for want of an engine
    assert left_under(project_copy) == []  # and removed again
    proc = run_build_py(
        "build",
        "--target",
        "miles-cpu",
        "--source",
        f"miles={archive}",
        cwd=project_copy,
        env=dict(env, MILES_SOURCE_MAX_FILES="lots"),
    )
    one_line(proc, 2, "MILES_SOURCE_MAX_FILES='lots'")


# ---- Source trees: links (to files or folders) are kept and hashed, never followed or dropped.


def test_a_folder_link_in_a_source_tree_is_kept_and_hashed(tmp_path):
    tree = tmp_path / "checkout"
    (tree / "pkg" / "real").mkdir(parents=True)
    (tree / "pkg" / "real" / "m.py").write_text("X = 1\n")
    (tree / "pkg" / "other").mkdir()
    (tree / "pkg" / "alias").symlink_to("real")
    staged = stage_local("miles", tree, tmp_path / "s" / "miles")
    link = tmp_path / "s" / "miles" / "pkg" / "alias"
    assert link.is_symlink() and os.readlink(link) == "real"
    (tree / "pkg" / "alias").unlink()
    (tree / "pkg" / "alias").symlink_to("other")
    assert stage_local("miles", tree, tmp_path / "s2" / "miles").digest != staged.digest
    archive = tmp_path / "src.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="miles")
    from_tar = stage_local("miles", archive, tmp_path / "s3" / "miles")
    assert (tmp_path / "s3" / "miles" / "pkg" / "alias").is_symlink()
    assert from_tar.digest == tree_digest(tmp_path / "s2" / "miles")


def test_a_fifo_in_a_source_tree_is_refused(tmp_path):
    tree = tmp_path / "checkout"
    tree.mkdir()
    os.mkfifo(tree / "pipe")
    with pytest.raises(UsageError, match="is not a regular file"):
        stage_local("miles", tree, tmp_path / "s" / "miles")


def test_a_source_file_name_with_a_newline_never_reaches_the_label(tmp_path):
    tree = tmp_path / "t"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "m.py").write_text("X = 1\n")
    archive = tmp_path / "evil\nLABEL x=y.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="miles")
    origin = stage_local("miles", archive, tmp_path / "s" / "miles").origin
    assert "\n" not in origin and origin.startswith("local evil\\nLABEL x=y.tar.gz sha256:")


# ---- Values that can never build are refused at validation (exit 2, before any work).

NEVER_BUILDS = [
    ("tag with a digest", ["--tag", "harden-x:1@sha256:" + "a" * 64], "a tag cannot carry a digest"),
    ("empty tag", ["--tag", ""], "--tag: an empty value"),
    ("digest base on a debootstrap family", ["--set", "base=miles-base@sha256:" + "a" * 64], "never a digest"),
    ("value over 64 KiB", ["--set", "env.BIG=" + "a" * 70_000], "longer than the 65536 a Dockerfile line holds"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in NEVER_BUILDS], ids=[c[0] for c in NEVER_BUILDS])
def test_values_that_can_never_build_are_refused_at_validation(project_copy, tmp_path, args, needle):
    line = one_line(run_build_py("build", "--target", "smoke", *args, cwd=project_copy, env=no_engine(tmp_path)), 2)
    assert needle in line and len(line) < 400
    assert not (project_copy / "build").exists()


def test_a_digest_base_in_a_debootstrap_spec_is_refused(project_copy, tmp_path):
    spec = project_copy / "images" / "smoke.yaml"
    spec.write_text(
        spec.read_text().replace("base: miles-base:bookworm-minbase-py311-git", "base: miles-base@sha256:" + "b" * 64)
    )
    one_line(
        run_build_py("render", "--target", "smoke", cwd=project_copy), 2, "images/smoke.yaml: base: ", "never a digest"
    )


# ---- Text that is not plain: refused like any other control character, never a traceback.

TEXT_CASES = [
    ("invalid UTF-8", os.fsdecode(b"env.X=\xff\xfe"), "not UTF-8 text"),
    ("C1 control", "env.X=a\x85b", "control character"),
    ("C1 control 0x9b", "env.X=a\x9bb", "control character"),
    ("bidi override", "env.X=a\u202eb", "control character"),
    ("bidi isolate", "env.X=a\u2066b", "control character"),
]


@pytest.mark.parametrize("item,needle", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_text_that_is_not_plain_is_refused(tmp_path, item, needle):
    out = tmp_path / "Dockerfile"
    one_line(run_build_py("render", "--target", "smoke", "--set", item, "-o", str(out)), 2, "env.X", needle)
    assert not out.exists()


# ---- Template partials come from inside the repository, like templates.


def test_a_partial_linked_out_of_the_repository_is_refused(project_copy, tmp_path):
    outside = tmp_path / "outside.j2"
    outside.write_text("RUN echo from-outside-the-repository\n")
    header = project_copy / "templates" / "partials" / "header.j2"
    header.unlink()
    header.symlink_to(outside)
    out = tmp_path / "Dockerfile"
    proc = run_build_py("render", "--target", "smoke", "-o", str(out), cwd=project_copy)
    one_line(proc, 2, "templates/partials/header.j2: leaves the repository")
    assert not out.exists()


# ---- Output paths: checked before any work; written whole or not at all.


def test_render_to_a_folder_is_bad_usage(tmp_path):
    one_line(run_build_py("render", "--target", "smoke", "-o", str(tmp_path)), 2, "-o ", "is a folder")


def test_verify_reports_into_a_missing_folder_are_refused_before_any_gate(tmp_path):
    for option in ("--json", "--junit"):
        proc = run_build_py(
            "verify",
            "--target",
            "smoke",
            "--image",
            "x:1",
            option,
            str(tmp_path / "nope" / "r"),
            env=no_engine(tmp_path),
        )
        one_line(proc, 2, option, "no folder")  # not exit 3: refused before the engine is even asked


def test_a_full_disk_is_one_line_and_keeps_the_old_file(tmp_path):
    one_line(run_build_py("render", "--target", "smoke", "-o", "/dev/full"), 1, "no space left")
    target = tmp_path / "Dockerfile"
    target.write_text("old\n")
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(tiny)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        (tiny / "Dockerfile").write_text("old\n")
        one_line(run_build_py("render", "--target", "rocm", "-o", str(tiny / "Dockerfile")), 1, "no space left")
        assert (tiny / "Dockerfile").read_text() == "old\n"  # not half of the new one
        assert sorted(p.name for p in tiny.iterdir()) == ["Dockerfile"]
    finally:
        subprocess.run(["umount", str(tiny)], check=True)


def test_a_read_only_checkout_is_one_line(project_copy, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(project_copy), str(ro)]).returncode == 0
    if not mounted:
        pytest.skip("cannot bind-mount here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)]).returncode != 0:
            pytest.skip("cannot remount read-only here")
        proc = run_build_py("bake", "--target", "rocm", "-o", str(tmp_path / "bake.json"), cwd=ro)
        one_line(proc, 1, "Read-only file system", "build")
        assert not (tmp_path / "bake.json").exists()
    finally:
        subprocess.run(["umount", str(ro)], check=True)


# ---- Echoes are short and one line.


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "t" * 100_000],
        ["--target", "miles-cpu", "--source", "miles=" + "p" * 100_000],
        ["--target", "miles-cpu", "--source", "n" * 100_000 + "=x"],
        ["--target", "miles-cpu", "--source", "miles=/tmp/no\nsuch\nplace"],
        ["--target", "smoke", "--secret", "id=x,src=/tmp/no\nsuch"],
    ],
    ids=["long-target", "long-source-path", "long-source-name", "source-path-newline", "secret-path-newline"],
)
def test_an_error_line_never_echoes_a_whole_value_or_breaks(tmp_path, args):
    line = one_line(run_build_py("build", *args, env=no_engine(tmp_path)), 2)
    assert len(line) < 400, len(line)


def test_a_truncated_archive_is_refused_with_one_line_and_nothing_left(project_copy, tmp_path):
    whole = _tar(tmp_path / "whole.tar.gz", [_member(f"miles/f{i}.bin", data=os.urandom(20_000)) for i in range(20)])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    proc = run_build_py(
        "build", "--target", "miles-cpu", "--source", f"miles={cut}", cwd=project_copy, env=no_engine(tmp_path)
    )
    one_line(proc, 2, "--source miles=", "cannot unpack")
    assert left_under(project_copy) == []
