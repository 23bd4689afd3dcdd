"""Command-line values are data like the spec's: an empty value is refused (it never means "not given"), a
`--custom-tag` is one tag component, options that would be ignored are refused, hidden text is refused by Unicode
category, and a `templates/` folder linked out of the repository is refused. Through the CLI, with no engine: each
is exit 2 and one line naming the option or key, before anything runs."""

from __future__ import annotations

import shutil

import pytest
import yaml
from support import no_engine, one_line, run_build_py

EMPTY = [
    ("build", "--target", "smoke", "--registry", "", "--push"),
    ("build", "--target", "smoke", "--builder", ""),
    ("build", "--target", "smoke", "--cache", ""),
    ("build", "--target", "smoke", "--cache-from", ""),
    ("build", "--target", "smoke", "--tag", ""),
    ("build", "--target", "smoke", "--image-tag", "custom", "--custom-tag", ""),
    ("build", "--target", "smoke", "--set", ""),
    ("build", "--target", "smoke", "--source", ""),
    ("verify", "--target", "smoke", "--image", ""),
    ("verify", "--target", "smoke", "--platform", ""),
    ("verify", "--target", "smoke", "--json", ""),
    ("verify", "--target", "smoke", "--junit", " "),
    ("render", "--target", "smoke", "-o", ""),
    ("bake", "--target", "smoke", "--registry", ""),
    ("lock", "--from-release-lock", ""),
    ("lock", "--family", ""),
    ("lock", "--update", ""),
]


@pytest.mark.parametrize("args", EMPTY, ids=[" ".join(a[:1] + a[3:]) for a in EMPTY])
def test_an_empty_value_is_refused_for_every_option(project_copy, tmp_path, args):
    option = next(a for a, b in zip(args, args[1:]) if b.strip() == "")
    proc = run_build_py(*args, cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "an empty value")
    assert proc.stderr.startswith(f"build.py: {'--output' if option == '-o' else option}: "), proc.stderr
    assert not (project_copy / "build").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--image-tag", "custom", "--custom-tag", "5000/evil"), "not a tag component"),
        (("--image-tag", "custom", "--custom-tag", "x:y"), "not a tag component"),
        (("--image-tag", "custom", "--custom-tag", ".x"), "not a tag component"),
        (("--image-tag", "dev", "--custom-tag", "x"), "--custom-tag needs --image-tag custom"),
        (("--custom-tag", "x"), "--custom-tag needs --image-tag custom"),
    ],
)
def test_a_custom_tag_is_one_tag_component_of_a_custom_image_tag(project_copy, tmp_path, args, needle):
    proc = run_build_py("build", "--target", "smoke", *args, cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, needle)


def test_pins_that_would_be_ignored_are_refused(project_copy, tmp_path):
    env = no_engine(tmp_path)
    proc = run_build_py("lock", "--pin", f"megatron_lm={'a' * 40}", "--pin", f"megatron_lm={'b' * 40}", env=env)
    one_line(proc, 2, "--pin 'megatron_lm': given twice")
    spec = project_copy / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["artifacts"] = {"notes": {"url": "https://example.com/notes.bin", "why": "a test"}}
    data["steps"].append({"artifact": "notes", "to": "/opt/notes.bin"})
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_build_py("lock", "--family", "smoke", "--pin", f"notes={'c' * 40}", cwd=project_copy, env=env)
    one_line(proc, 2, "--pin 'notes': an artifact is pinned by its digest")


@pytest.mark.parametrize(
    "item",
    ["components.megatron_lm.track.branch=main", "components.megatron_lm.why=because"],
)
def test_a_set_of_a_component_policy_is_refused(project_copy, tmp_path, item):
    proc = run_build_py("build", "--target", "miles-cpu", "--set", item, cwd=project_copy, env=no_engine(tmp_path))
    one_line(proc, 2, "a component's policy is the spec's and its lock's")


def test_a_platform_named_twice_is_refused_at_load(project_copy, tmp_path):
    env = no_engine(tmp_path)
    proc = run_build_py(
        "build", "--target", "smoke", "--set", "platforms=linux/amd64,linux/amd64", cwd=project_copy, env=env
    )
    one_line(proc, 2, "platforms[1]", "named twice")
    assert not (project_copy / "build").exists()


@pytest.mark.parametrize("char", ["\u200b", "\u200f", "\u061c", "\ufeff", "\u00ad", "\u2060", "\U000e0001"])
def test_every_format_character_is_hidden_text(project_copy, tmp_path, char):
    env = no_engine(tmp_path)
    proc = run_build_py("build", "--target", "smoke", "--set", f"env.X=a{char}b", cwd=project_copy, env=env)
    one_line(proc, 2, "env.X", "control character")
    spec = project_copy / "images" / "smoke.yaml"
    data = yaml.safe_load(spec.read_text())
    data["description"] = f"smoke{char}"
    spec.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    proc = run_build_py("render", "--target", "smoke", cwd=project_copy)
    one_line(proc, 2, "images/smoke.yaml", "description")


def test_a_templates_folder_linked_out_of_the_repository_is_refused(project_copy, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.move(project_copy / "templates", outside)
    (project_copy / "templates").symlink_to(outside)
    proc = run_build_py("render", "--target", "smoke", cwd=project_copy)
    one_line(proc, 2, "template", "leaves the repository")


@pytest.mark.docker
def test_skip_existing_considers_every_tag_a_build_would_create(smoke_image, docker_client):
    """With `--image-tag custom`, an existing input hash is no skip until the upstream-named tag points at it too."""
    tag = "miles:hardening-skip-smoke"  # --custom-tag hardening-skip + the smoke variant's postfix
    args = ("build", "--target", "smoke", "--skip-existing", "--image-tag", "custom", "--custom-tag", "hardening-skip")
    try:
        proc = run_build_py(*args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "skip:" not in proc.stdout and f"tagged {tag}" in proc.stdout, proc.stdout[-3000:]
        assert docker_client.images.get(tag).id == docker_client.images.get(smoke_image).id
        proc = run_build_py(*args)
        assert proc.returncode == 0 and "skip:" in proc.stdout, proc.stdout[-3000:]
    finally:
        try:
            docker_client.images.remove(tag, noprune=True)
        except Exception:  # never made
            pass


def _traversal_archive(path):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name in ("apex/setup.py", "apex/../../escape.py"):
            info = tarfile.TarInfo(name)
            info.size = 7
            tar.addfile(info, io.BytesIO(b"x = 1\n\n"))
    return path


def left_under(project) -> list:
    build = project / "build"
    return sorted(str(p) for p in build.rglob("*") if not p.is_dir() or any(p.iterdir())) if build.exists() else []


def test_a_bake_that_fails_keeps_no_context(project_copy, tmp_path):
    """A later target's refused `--source`, or a bake file that cannot be written, leaves no kept context."""
    env = no_engine(tmp_path)
    archive = _traversal_archive(tmp_path / "apex.tgz")
    args = ("bake", "--target", "rocm", "--target", "cuda", "--source", f"apex={archive}", "-o", "b.json")
    proc = run_build_py(*args, cwd=project_copy, env=env)
    one_line(proc, 2, "--source apex=")
    assert left_under(project_copy) == [] and not (project_copy / "b.json").exists()
    proc = run_build_py("bake", "--target", "rocm", "-o", "/dev/full", cwd=project_copy, env=env)
    assert proc.returncode == 1 and "no space left" in proc.stderr, proc.stderr
    assert left_under(project_copy) == []


def test_an_output_name_too_long_and_a_bad_image_are_bad_usage(project_copy, tmp_path):
    env = no_engine(tmp_path)
    proc = run_build_py("render", "--target", "smoke", "-o", "x" * 300 + ".Dockerfile", cwd=project_copy, env=env)
    one_line(proc, 2, "-o", "File name too long")
    proc = run_build_py("verify", "--target", "smoke", "--image", "BAD IMAGE!!", cwd=project_copy, env=env)
    one_line(proc, 2, "--image", "not an image reference")


@pytest.mark.docker
def test_a_platform_mismatch_is_named_as_one(smoke_image, docker_client):
    image = docker_client.images.get(smoke_image)
    here = f"{image.attrs['Os']}/{image.attrs['Architecture']}"
    other = "linux/arm64" if here != "linux/arm64" else "linux/amd64"
    proc = run_build_py("verify", "--target", "smoke", "--image", smoke_image, "--platform", other)
    one_line(proc, 2, f"image {smoke_image} is {here} on this engine, not {other}")
