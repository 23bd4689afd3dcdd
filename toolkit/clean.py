"""`build.py clean`: remove what builds and test runs leave on this machine, and nothing else.

What it removes: the engine's images that carry the project's labels (every image a build makes carries
`io.miles.input-hash`; the base and wheelhouse images this machine imports carry `io.miles.local-image`), never an
image by its repository name, never one without those labels; under the repository's `.cache/`, what the next build
or test run downloads again (the wheelhouse, the tests' wheels); the folders a run leaves when it is killed (staging
under build/<target>/, a debootstrap root or a lock's unpacked trees in the temp dir, the test helpers'); and the
test runs' temporary folders (pytest's, for this user, once their run ended). What it keeps: what ci/setup.sh
installs under `.cache/` (unless `--tools`), anything else there (a CUDA stub copied by hand cannot be made again),
and the BuildKit cache (unless `--build-cache`).

`--target NAME` narrows it to the images built for one target (label `io.miles.variant`) and touches no folder: the
wheelhouse and the temporary folders are shared by every target. Run it without `--target` when no build or test
run is under way: a running one's folders look like leftovers.
"""

from __future__ import annotations

import getpass
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolkit.cleanup import remove_tree
from toolkit.engine.base_image import ROOTFS_PREFIX
from toolkit.lock.pip_closure import TEMP_PREFIX as CLOSURE_PREFIX
from toolkit.plan.wheelhouse import CACHE as WHEELHOUSE
from toolkit.render.context import (
    BUILD_DIR,
    INPUT_HASH_LABEL,
    LOCAL_IMAGE_LABEL,
    SOURCES_PREFIX,
    STAGING_PREFIX,
    VARIANT_LABEL,
)
from toolkit.spec.catalog import ROOT

CACHE = ROOT / ".cache"
# Under .cache/: what the next run makes again. The wheelhouse (toolkit/plan/wheelhouse.py); the PyPI wheels the tests
# download when missing (tests/support.py: WHEELS, SGLANG_WHEELS).
REBUILT = (WHEELHOUSE.name, "wheels", "sglang-wheels")
# Under .cache/: what ci/setup.sh installs (ci/lint-tools.sh: actionlint); removed only with --tools.
TOOLS = ("actionlint",)
# Folders in the temp dir that a run removes when it ends, and leaves when it is killed: the toolkit's (a debootstrap
# root, a lock's unpacked trees) and those of the ci/ scripts and the test helpers (tests/unit/test_clean.py checks
# this list against every prefix they name).
TEMP_PREFIXES = (
    ROOTFS_PREFIX,
    CLOSURE_PREFIX,
    "miles-rev-",
    "miles-bench-",
    "bench-lock-",
    "miles-fast-",
    "miles-registry-",
    "fleetb-",
)
BUILD_PREFIXES = (STAGING_PREFIX, SOURCES_PREFIX)  # stage()'s folders under build/<target>/ (toolkit/render/context.py)
PYTEST_LOCK = ".lock"  # pytest keeps it in a run's numbered folder while that run lives


@dataclass(frozen=True)
class Item:
    """One thing to remove: a folder (`path`) or an image (`image_id`, with `name` for the user)."""

    name: str
    size: int | None = None  # bytes on disk it holds (for an image: its size, layers shared with others included)
    path: Path | None = None
    image_id: str | None = None


@dataclass(frozen=True)
class Kept:
    name: str
    why: str


def human(size: int | None) -> str:
    if size is None:
        return "size unknown"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # not reached


def disk_usage(paths) -> int:
    """Bytes on disk that removing every folder in `paths` frees: a file's blocks count once, and only when every
    hard link to it is inside them (a staged context links the repository's own files)."""
    seen: dict = {}
    total = 0
    stack = [str(p) for p in paths]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            total += st.st_blocks * 512
            try:
                stack.extend(os.path.join(path, name) for name in os.listdir(path))
            except OSError:
                pass
            continue
        key = (st.st_dev, st.st_ino)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == max(st.st_nlink, 1):  # the last link to it: removing them all frees its blocks
            total += st.st_blocks * 512
    return total


def pytest_root(tmp_dir, user: str | None = None) -> Path:
    """Where pytest puts this user's runs' temporary folders (its default basetemp's parent)."""
    return Path(tmp_dir) / f"pytest-of-{user or getpass.getuser()}"


def host_folders(
    root: Path = ROOT, tmp_dir=None, user: str | None = None, tools: bool = False
) -> tuple[list[Path], list[Kept]]:
    """(the folders to remove, what is kept and why), sorted; pure but for listing folders."""
    cache = root / CACHE.relative_to(ROOT)
    build = root / BUILD_DIR.relative_to(ROOT)
    tmp = Path(tmp_dir or tempfile.gettempdir())
    remove: list[Path] = []
    kept: list[Kept] = []
    for entry in _entries(cache):
        if entry.name in REBUILT:
            remove.append(entry)
        elif entry.name in TOOLS:
            if tools:
                remove.append(entry)
            else:
                kept.append(Kept(_show(entry, root), "installed by ci/setup.sh; --tools removes it"))
        else:
            kept.append(Kept(_show(entry, root), "not made by a build or a test run"))
    for target in _entries(build):
        remove += [e for e in _entries(target) if e.is_dir() and e.name.startswith(BUILD_PREFIXES)]
    remove += [e for e in _entries(tmp) if e.is_dir() and not e.is_symlink() and e.name.startswith(TEMP_PREFIXES)]
    for run in _entries(pytest_root(tmp, user)):
        if not run.is_dir() or run.is_symlink() or not run.name.startswith("pytest-"):
            continue  # pytest-current: a link to the newest run
        if (run / PYTEST_LOCK).exists():
            kept.append(Kept(str(run), "a pytest run that has not ended (pytest removes it once it is stale)"))
        else:
            remove.append(run)
    return sorted(remove), kept


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:  # missing, or not a folder
        return []


def _show(path: Path, root: Path = ROOT) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def image_filters(target: str | None) -> list[dict]:
    """The engine's label filters that select the project's images: one query per filter, results joined."""
    if target is not None:
        return [{"label": [INPUT_HASH_LABEL, f"{VARIANT_LABEL}={target}"]}]
    return [{"label": INPUT_HASH_LABEL}, {"label": LOCAL_IMAGE_LABEL}]


def project_images(client, target: str | None = None) -> list[Item]:
    """The engine's images that carry the project's labels (of one target's builds, with `target`)."""
    found: dict = {}
    for filters in image_filters(target):
        for image in client.images.list(filters=filters):
            found[image.id] = image
    items = []
    for image_id, image in sorted(found.items(), key=lambda kv: (sorted(kv[1].tags or ["~"]), kv[0])):
        tags = ", ".join(sorted(image.tags)) if image.tags else "<untagged>"
        items.append(Item(name=f"image {tags} ({image_id[7:19]})", size=image.attrs.get("Size"), image_id=image_id))
    return items


def layers_size(client) -> int | None:
    """Bytes the engine's image layers take (`docker system df`), or None when the engine does not say."""
    try:
        return client.df().get("LayersSize")
    except Exception:  # noqa: BLE001 - only the summary's figure depends on it
        return None


def build_cache_size(client) -> int:
    """Bytes of BuildKit cache that `docker builder prune --all` would remove (records not in use)."""
    records = client.df().get("BuildCache") or []
    return sum(r.get("Size") or 0 for r in records if not r.get("InUse"))


@dataclass
class Result:
    removed: int = 0
    failed: int = 0
    freed: int = 0


def remove_images(client, items: list[Item], out) -> Result:
    import docker.errors

    result = Result()
    before = layers_size(client)
    for item in items:
        try:
            client.images.remove(item.image_id, force=True)
        except docker.errors.ImageNotFound:
            continue  # gone meanwhile
        except docker.errors.APIError as e:
            out(f"not removed: {item.name}: {e.explanation or e}")
            result.failed += 1
            continue
        out(f"removed {item.name}")
        result.removed += 1
    after = layers_size(client)
    if before is not None and after is not None:
        result.freed = max(before - after, 0)
    else:
        result.freed = sum(i.size or 0 for i in items)
    return result


def remove_folders(items: list[Item], out) -> Result:
    result = Result()
    for item in items:
        assert item.path is not None
        remove_tree(item.path)
        if os.path.lexists(item.path):
            out(f"not removed: {item.name} (no permission, or a mount under it)")
            result.failed += 1
            continue
        out(f"removed {item.name} ({human(item.size)})")
        result.removed += 1
        result.freed += item.size or 0
    return result


def folder_items(paths: list[Path], root: Path = ROOT) -> list[Item]:
    return [Item(name=_show(p, root), size=disk_usage([p]), path=p) for p in paths]


def summary(images: int, folders: int, freed: int, build_cache: int | None, dry_run: bool, failed: int = 0) -> str:
    """The one closing line."""
    cache = f", build cache {human(build_cache)}" if build_cache is not None else ""
    if dry_run:
        return (
            f"clean --dry-run: would remove {images} image(s) and {folders} folder(s); "
            f"would free up to {human(freed)}{cache}; nothing removed"
        )
    left = f"; {failed} not removed (see above)" if failed else ""
    return f"clean: removed {images} image(s) and {folders} folder(s); freed {human(freed)}{cache}{left}"


def clean(
    client,
    target: str | None = None,
    dry_run: bool = False,
    build_cache: bool = False,
    images: bool = True,
    tools: bool = False,
    out=print,
    root: Path = ROOT,
    tmp_dir=None,
) -> int:
    """Do (or, with `dry_run`, list) the clean-up; return the exit code: 0, or 1 when something could not be
    removed. `client` is the engine's (None when `images` is False and `build_cache` is too)."""
    image_items = project_images(client, target) if images else []
    if target is None:
        paths, kept = host_folders(root, tmp_dir, tools=tools)
    else:
        paths, kept = [], []
    folders = folder_items(paths, root)
    cache_size = build_cache_size(client) if build_cache else None
    if dry_run:
        for item in image_items + folders:
            out(f"would remove {item.name} ({human(item.size)})")
        for k in kept:
            out(f"keep {k.name} ({k.why})")
        if build_cache:
            out(f"would prune the engine's BuildKit cache ({human(cache_size)})")
        freed = sum(i.size or 0 for i in image_items + folders) + (cache_size or 0)
        out(summary(len(image_items), len(folders), freed, cache_size, dry_run=True))
        return 0
    done_images = remove_images(client, image_items, out) if image_items else Result()
    done_folders = remove_folders(folders, out)
    for k in kept:
        out(f"kept {k.name} ({k.why})")
    pruned = None
    if build_cache:
        pruned = client.api.prune_builds(all=True).get("SpaceReclaimed") or 0
        out(f"pruned the engine's BuildKit cache ({human(pruned)})")
    failed = done_images.failed + done_folders.failed
    freed = done_images.freed + done_folders.freed + (pruned or 0)
    out(summary(done_images.removed, done_folders.removed, freed, pruned, dry_run=False, failed=failed))
    return 1 if failed else 0
