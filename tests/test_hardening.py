"""Hostile and careless input through the CLI, no engine needed: spec and `--set` values are data (never a
Dockerfile instruction or a shell command), files come from inside the repository, gates cannot be weakened,
bad tags and secrets are refused before anything runs, a silent engine is given up on quickly, and the input
hash does not depend on the host.

Every refusal is exit 2 with one line naming the file and the key, and writes nothing. `build` runs here with
DOCKER_HOST pointing at no engine: a value that got past validation would reach the engine stage (exit 3).
"""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from dockerfile_parse import DockerfileParser
from support import ROOT, no_engine, one_line, run_build_py
from support import edit_spec as edit

from toolkit.spec.catalog import load_catalog


def build_refused(project, tmp_path, args, *needles, family_file="images/smoke.yaml"):
    """`build` in the project copy is refused before the engine and before anything is written."""
    proc = run_build_py("build", *args, cwd=project, env=no_engine(tmp_path))
    line = one_line(proc, 2, *needles)
    assert not (project / "build").exists()
    return line


# ---- Values become neither Dockerfile instructions nor shell commands.

SET_CASES = [
    (
        "env newline",
        "env.FOO=bar\nRUN rm -rf /opt/venv/lib/python3.11/site-packages/torch",
        "env.FOO",
        "control character",
    ),
    ("args newline", "args.X=1\nRUN touch /tmp/INJ", "args.X", "control character"),
    ("env name with a space", "env.A B=1", "env.A B", "identifiers"),
    ("blank args name", "args.=1", "args.", "identifiers"),
    ("base with a newline", "base=miles-base:bookworm\nRUN touch /tmp/INJ", "base", "not an image reference"),
    ("pip name with a quote", 'pip.x" ; touch /tmp/INJ ; echo "=1.0', "pip.x", "PEP 508"),
    ("pip version with a command", "pip.torch=2.13.0; touch /tmp/INJ", "pip.torch", "pinned"),
]


@pytest.mark.parametrize("item,key,problem", [c[1:] for c in SET_CASES], ids=[c[0] for c in SET_CASES])
def test_set_values_that_would_inject_are_refused(project_copy, tmp_path, item, key, problem):
    line = build_refused(project_copy, tmp_path, ["--target", "smoke", "--set", item], key, problem)
    assert line.startswith("build.py: --set (images/smoke.yaml variants.smoke): ")
    out = tmp_path / "Dockerfile"
    one_line(run_build_py("render", "--target", "smoke", "--set", item, "-o", str(out), cwd=project_copy), 2, key)
    assert not out.exists()


SPEC_CASES = [
    ("python as a shell fragment", "smoke", lambda d: d.update(python="exit 0; :"), "python", "absolute"),
    (
        "pip name with a quote",
        "smoke",
        lambda d: d["pip"].update({'x" ; touch /tmp/INJ ; echo "': "1.0"}),
        "pip.x",
        "PEP 508",
    ),
    (
        "git url with a newline",
        "rocm",
        lambda d: d["components"]["miles"].update(git="https://github.com/radixark/miles.git\nRUN touch /tmp/INJ"),
        "components.miles.git",
        "git URL",
    ),
    (
        "git url with a command",
        "rocm",
        lambda d: d["components"]["miles"].update(git="https://x.invalid/a;touch${IFS}/tmp/INJ"),
        "components.miles.git",
        "git URL",
    ),
    (
        "ref with a trailing newline",
        "rocm",
        lambda d: d["components"]["miles"].update(ref="bf72ef940a03fb206ac4c09a682f52dd30ebae65\n"),
        "components.miles.ref",
        "40-hex",
    ),
    (
        "base with a newline",
        "smoke",
        lambda d: d.update(base="miles-base:x\nRUN touch /tmp/INJ"),
        "base",
        "not an image reference",
    ),
    (
        "patch tree pasted into git -C",
        "smoke",
        lambda d: d.update(patches=[{"file": "images/smoke.constraints.txt", "tree": "/tmp; touch /tmp/INJ"}]),
        "patches[0].tree",
        "absolute normalised path",
    ),
    (
        "relative patch tree",
        "smoke",
        lambda d: d.update(patches=[{"file": "images/smoke.constraints.txt", "tree": "opt/../venv"}]),
        "patches[0].tree",
        "absolute normalised path",
    ),
    (
        "env value with a newline",
        "smoke",
        lambda d: d.update(env={"A": "1\nRUN touch /tmp/INJ"}),
        "env.A",
        "control character",
    ),
    ("repository with a space", "smoke", lambda d: d.update(repository="miles x"), "repository", "image name"),
    (
        "tag suffix with a slash",
        "smoke",
        lambda d: d["variants"]["smoke"].update(tag_suffix="a/b"),
        "variants.smoke.tag_suffix",
        "not an image tag",
    ),
    (
        "debootstrap option",
        "smoke",
        lambda d: d["base_build"]["debootstrap"].update(suite="--foreign"),
        "base_build.debootstrap.suite",
        "Debian name",
    ),
]


@pytest.mark.parametrize("family,mutate,key,problem", [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_spec_values_that_would_inject_are_refused_at_load(project_copy, tmp_path, family, mutate, key, problem):
    edit(project_copy, family, mutate)
    target = "rocm" if family == "rocm" else "smoke"
    build_refused(project_copy, tmp_path, ["--target", target], f"images/{family}.yaml: {key}", problem)


# ---- Files come from inside the repository.


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "images/../../etc/passwd"])
def test_patch_file_outside_the_repository_is_refused_and_linted(project_copy, tmp_path, path):
    edit(project_copy, "smoke", lambda d: d.update(patches=[{"file": path, "tree": "/opt/venv"}]))
    build_refused(
        project_copy, tmp_path, ["--target", "smoke"], "images/smoke.yaml: patches[0].file", "inside the repository"
    )
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1
    assert (
        "spec: images/smoke.yaml: patches[0].file: not a relative normalised path inside the repository" in proc.stdout
    )


def test_patch_file_linked_out_of_the_repository_is_refused(project_copy, tmp_path):
    (project_copy / "images" / "evil.patch").symlink_to("/etc/passwd")
    edit(project_copy, "smoke", lambda d: d.update(patches=[{"file": "images/evil.patch", "tree": "/opt/venv"}]))
    build_refused(project_copy, tmp_path, ["--target", "smoke"], "patches[0].file", "leaves the repository")


@pytest.mark.parametrize("template", ["../README.md", "/etc/passwd", "partials/../../README.md"])
def test_template_outside_templates_is_refused_and_linted(project_copy, tmp_path, template):
    (project_copy / "README.md").write_text("{{ nope }\n")
    edit(project_copy, "smoke", lambda d: d.update(template=template))
    build_refused(project_copy, tmp_path, ["--target", "smoke"], "images/smoke.yaml: template")
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1 and "spec: images/smoke.yaml: template: " in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


# ---- Gates cannot be weakened; one schema (verify/kinds, through verify/config.py) applied when the spec loads.

GATE_CASES = [
    ("empty imports", lambda g: g.update(imports=[]), "gates.imports", "must not be empty"),
    ("empty compile", lambda g: g.update(compile=[]), "gates.compile", "must not be empty"),
    (
        "command runs a shell",
        lambda g: g.update(commands=[{"name": "c", "argv": ["bash", "-c", "false || true"]}]),
        "gates.commands[0].argv[0]",
        "the image's Python on a probe",
    ),
    (
        "substring allowance",
        lambda g: g.update(pip_check={"allow": [{"match": "x", "reason": "known"}]}),
        "gates.pip_check.allow[0].match",
        "a substring can match any pip check line",
    ),
    (
        "allowance without a reason",
        lambda g: g.update(pip_check={"allow": [{"distribution": "torch", "requirement": "numpy"}]}),
        "gates.pip_check.allow[0].reason",
        "is required",
    ),
    (
        "relative provenance",
        lambda g: g["provenance"].update(transformers="opt/venv"),
        "gates.provenance.transformers",
        "absolute directory",
    ),
    ("bridge not imported", lambda g: g.update(imports=["torch"]), "gates.imports", "sglang_attn_bridge"),
    ("no pip check over declared packages", lambda g: g.pop("pip_check"), "gates.pip_check", "pip check"),
]


@pytest.mark.parametrize("mutate,key,problem", [c[1:] for c in GATE_CASES], ids=[c[0] for c in GATE_CASES])
def test_weakened_gates_are_refused_at_load_and_linted(project_copy, tmp_path, mutate, key, problem):
    edit(project_copy, "smoke", lambda d: mutate(d["gates"]))
    build_refused(project_copy, tmp_path, ["--target", "smoke"], f"images/smoke.yaml: {key}", problem)
    proc = run_build_py("lint", cwd=project_copy)
    assert proc.returncode == 1 and f"spec: images/smoke.yaml: {key}" in proc.stdout


def test_gate_schema_is_the_runners_own(project_copy, tmp_path):
    """What the runner accepts, the spec accepts (a command timeout); the spec's one-line error is the runner's."""
    edit(project_copy, "smoke", lambda d: d["gates"]["commands"][0].update(timeout=120))
    out = tmp_path / "Dockerfile"
    proc = run_build_py("render", "--target", "smoke", "-o", str(out), cwd=project_copy)
    assert proc.returncode == 0, proc.stderr
    edit(project_copy, "smoke", lambda d: d["gates"]["commands"][0].update(timeout=-1))
    one_line(
        run_build_py("render", "--target", "smoke", cwd=project_copy),
        2,
        "images/smoke.yaml: gates.commands[0].timeout: must be a positive number of seconds",
    )


# ---- YAML: duplicate keys, alias bombs.


def test_duplicate_keys_are_refused(project_copy, tmp_path):
    spec = project_copy / "images" / "smoke.yaml"
    original = spec.read_text()
    spec.write_text(original + "  smoke:\n    tag_suffix: other\n")  # the variant, a second time
    build_refused(project_copy, tmp_path, ["--target", "smoke"], "images/smoke.yaml: line ", "duplicate key 'smoke'")
    spec.write_text(original.replace("repository: miles\n", "repository: miles\nrepository: evil\n"))
    one_line(run_build_py("list", cwd=project_copy), 2, "duplicate key 'repository'")


def test_alias_bomb_is_refused_quickly_with_a_short_line(project_copy, tmp_path):
    levels = ['a0: &a0 ["' + "x" * 40 + '"]']
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    spec = project_copy / "images" / "smoke.yaml"
    spec.write_text(
        spec.read_text().replace("description: CPU", "x_bomb:\n  " + "\n  ".join(levels) + "\ndescription: CPU")
    )
    assert len(spec.read_bytes()) < 3500  # a file of a few KB that would expand to 9**9 * 40 bytes
    started = time.monotonic()
    line = build_refused(project_copy, tmp_path, ["--target", "smoke"], "images/smoke.yaml", "aliases expand")
    assert time.monotonic() - started < 30 and len(line) < 300


def test_an_echoed_value_is_cut_short(project_copy, tmp_path):
    edit(project_copy, "smoke", lambda d: d["variants"]["smoke"].update(tag_suffix="x" * 100_000))
    line = build_refused(project_copy, tmp_path, ["--target", "smoke"], "variants.smoke.tag_suffix")
    assert len(line) < 300


# ---- Tags, secrets and the registry, before anything runs.


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--tag", "harden-Bad/X:1"], "not an image reference"),
        (["--tag", "harden-x:bad tag"], "not an image reference"),
        (["--tag", "harden-x:" + "t" * 129], "not an image reference"),
        (["--set", "tag_suffix=Bad/Tag"], "tag_suffix"),
        (["--registry", "bad registry"], "--registry"),
    ],
    ids=["uppercase-name", "space-in-tag", "tag-too-long", "tag-suffix", "registry"],
)
def test_invalid_tags_are_refused_before_anything_runs(project_copy, tmp_path, args, needle):
    build_refused(project_copy, tmp_path, ["--target", "smoke", *args], needle)


@pytest.mark.parametrize(
    "args,needle",
    [(["--cache", "x,mode=max"], "--cache"), (["--registry", "Bad Reg"], "--registry")],
    ids=["cache-attribute", "registry"],
)
def test_bake_refuses_values_that_would_become_bake_attributes(tmp_path, args, needle):
    out = tmp_path / "bake.json"
    one_line(run_build_py("bake", "--target", "rocm", *args, "-o", str(out)), 2, needle)
    assert not out.exists()


def test_missing_secret_file_is_bad_usage_and_writes_nothing(project_copy, tmp_path):
    build_refused(
        project_copy,
        tmp_path,
        ["--target", "smoke", "--secret", f"id=tok,src={tmp_path}/missing"],
        "--secret",
        "no such file",
    )


# ---- An engine that accepts and never answers.


def test_silent_engine_exits_3_within_seconds(tmp_path):
    sock_path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(16)  # connections are accepted by the kernel; nothing is ever read or answered
    try:
        env = dict(os.environ, DOCKER_HOST=f"unix://{sock_path}")
        started = time.monotonic()
        proc = run_build_py("--target", "smoke", env=env, timeout=90)
        took = time.monotonic() - started
    finally:
        server.close()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no answer within 10s" in lines[0], lines
    assert took < 45


# ---- The input hash covers what goes into the image, nothing about the host.


def _bake_tags(tmp_path, env, name):
    out = tmp_path / f"{name}.json"
    proc = run_build_py("bake", "--target", "rocm", "--target", "cuda", "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads(out.read_text())["target"]
    return {t: (v["tags"], v["labels"]["io.miles.input-hash"], v.get("secret")) for t, v in targets.items()}


def test_input_hash_is_the_same_with_and_without_a_host_ca(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot-a-real-one\n-----END CERTIFICATE-----\n")
    bare = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    with_ca = _bake_tags(tmp_path, dict(bare, PIP_CERT=str(ca)), "with")
    without = _bake_tags(tmp_path, dict(bare, PIP_CONFIG_FILE=os.devnull), "without")
    assert all(secret for _, _, secret in with_ca.values())  # the CA really is handed to the build ...
    assert not any(secret for _, _, secret in without.values())
    for target in with_ca:  # ... and changes neither the input hash nor the tags
        assert with_ca[target][:2] == without[target][:2], target


def test_bake_stages_content_addressed_contexts_in_the_registry(tmp_path):
    out = tmp_path / "bake.json"
    proc = run_build_py("bake", "--target", "rocm", "--registry", "ghcr.io/org", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    tags = json.loads(out.read_text())["target"]["rocm720-mi35x"]["tags"]
    assert tags[0] == "ghcr.io/org/miles:rocm720-mi35x" and tags[1].startswith("ghcr.io/org/miles:rocm720-mi35x-")
    assert (ROOT / "build" / "rocm720-mi35x" / tags[1].rsplit("-", 1)[1]).is_dir()  # content-addressed context


# ---- The gates judge the image that gets the tag.


@pytest.mark.parametrize("target", sorted(load_catalog().variants))
def test_nothing_after_the_gate_step_changes_the_runtime(tmp_path, target):
    """ENV (from the spec or `--set env.*`) lands before the gate step; after it only labels, the default command,
    or a WORKDIR the image already had."""
    out = tmp_path / "Dockerfile"
    proc = run_build_py("render", "--target", target, "--set", "env.PYTHONHOME=/nonexistent", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    steps = [
        (i["instruction"], i["value"]) for i in DockerfileParser(str(out)).structure if i["instruction"] != "COMMENT"
    ]
    gate = max(n for n, (kind, value) in enumerate(steps) if kind == "RUN" and "-m verify" in value)
    assert any(kind == "ENV" and "PYTHONHOME" in value for kind, value in steps[:gate])
    workdirs = [value for kind, value in steps[:gate] if kind == "WORKDIR"]
    for kind, value in steps[gate + 1 :]:
        assert kind in ("LABEL", "CMD") or (kind == "WORKDIR" and workdirs and value == workdirs[-1]), (kind, value)
