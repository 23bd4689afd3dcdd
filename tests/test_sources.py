"""Git components as named build contexts (unit, no engine): `--source` parsing, staging and digests, the input hash
following what was used, the rendered Dockerfiles reading sources only through named contexts, and the bake file."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from support import MEGATRON_COMMIT, MILES_COMMIT, ROOT, SNAPSHOT, git, run_build_py

from toolkit.engine.bake import bake_file
from toolkit.engine.invocation import Invocation
from toolkit.errors import UsageError
from toolkit.plan.build_plan import make_plan
from toolkit.plan.sources import overrides_for, parse_overrides, stage_local, tree_digest
from toolkit.render.context import build_labels, keep, plan_hash, stage
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

COMMIT = MILES_COMMIT
MEGATRON = f"https://github.com/radixark/Megatron-LM.git#{MEGATRON_COMMIT}"


def miles_cpu():
    return load_catalog().resolve("miles-cpu")


def small_tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("X = 1\n")
    (root / "requirements.txt").write_text("wandb\n")
    return root


def tarball_of(tree: Path, dest: Path, top="miles", comment=None) -> Path:
    with tarfile.open(
        dest, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": comment} if comment else None
    ) as tar:
        tar.add(tree, arcname=top)
    return dest


def test_a_tarball_and_its_unpacked_tree_stage_to_the_same_digest(tmp_path):
    tree = small_tree(tmp_path / "checkout")
    (tree / ".git").mkdir()
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # never staged, never hashed
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    archive = tarball_of(small_tree(tmp_path / "clean"), tmp_path / "src.tar.gz", comment=COMMIT)
    from_dir = stage_local("miles", tree, tmp_path / "s1" / "miles")
    from_tar = stage_local("miles", archive, tmp_path / "s2" / "miles")
    assert from_dir.digest == from_tar.digest
    assert not (tmp_path / "s1" / "miles" / ".git").exists()
    assert (tmp_path / "s2" / "miles" / "pkg" / "__init__.py").read_text() == "X = 1\n"  # top folder stripped
    assert f"archive of commit {COMMIT}" in from_tar.origin and from_tar.digest in from_tar.origin


def test_a_git_checkout_is_staged_with_a_fresh_shallow_git_dir_of_its_own(tmp_path):
    tree = small_tree(tmp_path / "checkout")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "one")):
        git(tree, *args)
    (tree / "pkg" / "__init__.py").write_text("X = 2\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "two")
    head = git(tree, "rev-parse", "HEAD").stdout.strip()
    git(tree, "remote", "add", "origin", "https://user:s3cret@example.com/o/miles.git")
    git(tree, "branch", "other")
    (tree / "pkg" / "__init__.py").write_text("X = 3\n")  # uncommitted: staged as it is
    url = "https://github.com/radixark/miles.git"
    staged = stage_local("miles", tree, tmp_path / "s" / "miles", url)
    dest = tmp_path / "s" / "miles"
    assert git(dest, "rev-parse", "HEAD").stdout.strip() == head
    assert git(dest, "remote", "get-url", "origin").stdout.strip() == url
    assert git(dest, "rev-list", "--count", "HEAD").stdout.strip() == "1"  # shallow: HEAD's commit only
    assert git(dest, "status", "--porcelain").stdout.split() == ["M", "pkg/__init__.py"]
    assert "s3cret" not in "".join(p.read_text(errors="ignore") for p in (dest / ".git").rglob("*") if p.is_file())
    assert git(dest, "for-each-ref", "refs/heads", "refs/tags").stdout.strip() == ""  # none of the source's refs
    assert f"(git checkout of commit {head})" in staged.origin
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "pkg").mkdir()
    (plain / "pkg" / "__init__.py").write_text("X = 3\n")
    (plain / "requirements.txt").write_text((tree / "requirements.txt").read_text())
    copied = stage_local("miles", plain, tmp_path / "s2" / "miles", url)
    assert not (tmp_path / "s2" / "miles" / ".git").exists()
    assert tree_digest(dest) == tree_digest(tmp_path / "s2" / "miles")  # the same content, .git aside...
    assert staged.digest != copied.digest  # ...but the image's .git differs, and so does the input hash


def test_one_changed_byte_changes_the_digest(tmp_path):
    tree = small_tree(tmp_path / "t")
    before = tree_digest(tree)
    (tree / "pkg" / "__init__.py").write_text("X = 2\n")
    assert tree_digest(tree) != before
    (tree / "pkg" / "__init__.py").write_text("X = 1\n")
    assert tree_digest(tree) == before
    (tree / "pkg" / "__init__.py").chmod(0o755)  # the executable bit is content too
    assert tree_digest(tree) != before


@pytest.mark.parametrize(
    "item, message",
    [
        ("miles", "expected NAME=PATH"),
        ("nope=/tmp", "'nope' is not a git component of miles-cpu"),
        ("miles=/no/such/path", "neither a folder nor a tar archive"),
        (f"miles={ROOT / 'README.md'}", "neither a folder nor a tar archive"),
    ],
)
def test_bad_source_overrides_are_usage_errors(item, message):
    with pytest.raises(UsageError, match=message):
        parse_overrides([item], miles_cpu())


def test_a_bad_source_exits_2_before_anything_is_written(tmp_path):
    proc = run_build_py(
        "build",
        "--target",
        "miles-cpu",
        "--source",
        "miles=/no/such/path",
        env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--source 'miles=/no/such/path'" in proc.stderr


def test_the_input_hash_follows_the_source_that_was_used(tmp_path):
    variant = miles_cpu()
    pinned = make_plan(variant, revision="r")
    text = render(pinned)
    tree = small_tree(tmp_path / "t")
    local = make_plan(variant, revision="r", sources=[f"miles={tree}"])
    ctx1 = stage(local, text, build_dir=tmp_path / "b1")
    ctx2 = stage(local, text, build_dir=tmp_path / "b2")
    assert ctx1.input_hash == ctx2.input_hash != plan_hash(pinned, text)
    (tree / "pkg" / "__init__.py").write_text("X = 3\n")
    assert stage(local, text, build_dir=tmp_path / "b3").input_hash != ctx1.input_hash
    # What the engine is given and what the image records.
    staged = Path(ctx1.build_contexts["src-miles"])  # a private folder of this build, beside its context
    assert staged.name == "miles" and staged.parent == ctx1.sources_dir and staged.parent.parent == ctx1.path.parent
    assert (staged / "pkg" / "__init__.py").read_text() == "X = 1\n"
    assert build_labels(local, ctx1)["io.miles.source.miles"].startswith("local t sha256:")
    pinned_ctx = stage(pinned, text, build_dir=tmp_path / "b4")
    remote = f"https://github.com/radixark/miles.git#{COMMIT}"
    assert pinned_ctx.build_contexts == {"src-miles": remote, "src-megatron_lm": MEGATRON}
    assert pinned_ctx.input_hash == plan_hash(pinned, text)
    assert build_labels(pinned, pinned_ctx)["io.miles.source.miles"] == remote


def test_rendered_dockerfiles_read_git_sources_only_through_named_contexts():
    catalog = load_catalog()
    for name, variant in catalog.variants.items():
        text = render(make_plan(variant, revision="r"))
        assert "git clone" not in text and "git fetch" not in text and "git+" not in text, name
        for component, spec in variant.components.items():
            if "git" in spec:
                assert f"from=src-{component}" in text, (name, component)
                assert spec["git"] not in text, (name, component)  # the URL reaches BuildKit, not a RUN line
    assert "COPY --from=src-miles / /root/miles" in render(make_plan(miles_cpu(), revision="r"))


def test_bake_targets_carry_their_named_contexts(tmp_path):
    plan = make_plan(miles_cpu(), revision="r")
    ctx = stage(plan, render(plan), build_dir=tmp_path)
    target = bake_file([(plan.name, Invocation.of(plan, ctx))])["target"]["miles-cpu"]
    assert target["contexts"] == {
        "src-miles": f"https://github.com/radixark/miles.git#{COMMIT}",
        "src-megatron_lm": MEGATRON,
    }
    assert target["args"]["BUILDKIT_CONTEXT_KEEP_GIT_DIR"] == "1"  # a git named context keeps its .git
    assert target["labels"]["io.miles.source.miles"].endswith(COMMIT)


def test_a_kept_context_keeps_its_local_sources_beside_it(tmp_path):
    """bake keeps contexts for later: the `--source` trees move with them, and the bake file names the new place."""
    plan = make_plan(miles_cpu(), revision="r", sources=[f"miles={small_tree(tmp_path / 'src')}"])
    staged = stage(plan, render(plan), build_dir=tmp_path / "build")
    kept = keep(staged)
    assert not staged.path.exists() and not staged.sources_dir.exists()
    assert kept.sources_dir == kept.path.parent / f"{kept.short_hash}.sources"
    context = bake_file([(plan.name, Invocation.of(plan, kept))])["target"]["miles-cpu"]["contexts"]["src-miles"]
    assert Path(context) == kept.sources_dir / "miles" and (Path(context) / "pkg" / "__init__.py").is_file()
    again = keep(stage(plan, render(plan), build_dir=tmp_path / "build"))  # same content: the folders are reused
    assert again == kept and sorted(p.name for p in (tmp_path / "build" / "miles-cpu").iterdir()) == [
        kept.short_hash,
        f"{kept.short_hash}.sources",
    ]


def test_bake_source_goes_to_the_targets_that_have_the_component(tmp_path):
    catalog = load_catalog()
    variants = [catalog.resolve("miles-cpu"), catalog.resolve("smoke")]
    item = f"miles={small_tree(tmp_path / 'src')}"
    assert overrides_for(variants, [item]) == {"miles-cpu": [item], "smoke": []}
    with pytest.raises(UsageError, match="no target here has the git component 'megatron' \\(megatron_lm, miles\\)"):
        overrides_for(variants, [f"megatron={tmp_path}"])
    with pytest.raises(UsageError, match="expected NAME=PATH"):
        overrides_for(variants, ["miles"])


@pytest.mark.skipif(
    not SNAPSHOT.exists(), reason="the upstream miles snapshot (shared/upstream) is not beside the repo"
)
def test_the_upstream_snapshot_stages_as_its_commit(tmp_path):
    src = stage_local("miles", SNAPSHOT, tmp_path / "miles")
    assert f"archive of commit {COMMIT}" in src.origin
    assert (tmp_path / "miles" / "miles" / "backends" / "fsdp_utils" / "actor.py").is_file()


def test_requirements_filter_drops_exactly_the_named_distributions(tmp_path):
    import subprocess
    import sys

    req = tmp_path / "requirements.txt"
    req.write_text('accelerate\nnvidia_resiliency.ext~=0.6.0; platform_system == "Linux"\n# note\nwandb\n')
    tool = ROOT / "image_tools" / "requirements.py"
    out = subprocess.run(
        [sys.executable, str(tool), str(req), "--exclude", "nvidia-resiliency-ext"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout == "accelerate\n# note\nwandb\n"
    stale = subprocess.run([sys.executable, str(tool), str(req), "--exclude", "gone"], capture_output=True, text=True)
    assert stale.returncode == 1 and "gone" in stale.stderr
