"""Prepare, on the host, the wheels a family installs, for the image's Python and platform.

The wheelhouse is exactly the family's closed pin set (its constraints file, every line downloaded with
`--no-deps`), plus that file itself as `constraints.txt`: the build resolves offline against it, so a requirement
outside the set fails the build instead of silently fetching something. The host's pip already knows how to
reach an index through this machine's proxy (and where the local CPU torch lies); the build then installs from a
bind mount, which is hermetic and fast on rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from toolkit.cleanup import scope_or_own
from toolkit.engine import docker_engine as engine
from toolkit.errors import BuildFailed, UsageError, short
from toolkit.render.context import LOCAL_IMAGE_LABEL
from toolkit.spec.catalog import ROOT
from toolkit.spec.values import PLATFORM_MACHINES

CACHE = ROOT / ".cache" / "wheelhouse"


def requirements(variant) -> list[str]:
    return [f"{name}=={version}" for name, version in sorted(variant.pins().items())]


def platform_tags(newest: str) -> list[str]:
    """Every manylinux tag a glibc of `newest` (e.g. manylinux_2_36_x86_64) runs, newest first: pip download
    matches --platform exactly, so each older tag must be named."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", newest)
    if not m:
        return [newest]
    minor, arch = int(m.group(1)), m.group(2)
    return [f"manylinux_2_{n}_{arch}" for n in range(minor, 16, -1)] + [f"manylinux2014_{arch}"]


def home_platform(variant) -> str:
    """The platform the spec's own wheel tag is for: the wheelhouse image the Dockerfile names holds its wheels."""
    tag = variant.wheelhouse["platform"]
    return next((p for p, m in PLATFORM_MACHINES.items() if tag.endswith("_" + m)), "linux/amd64")


def recipe(variant, platform: str | None = None) -> tuple:
    """(wheel platform tag, constraints file name) of the wheels for `platform` (default: the home platform)."""
    w = variant.wheelhouse
    if platform is None or platform == home_platform(variant):
        return w["platform"], w.get("constraints")
    other = (w.get("other_platforms") or {}).get(platform)
    if other is None:
        raise UsageError(f"{variant.spec_file}: wheelhouse.other_platforms has no wheels for {short(platform)}")
    return other["platform"], other.get("constraints", w.get("constraints"))


def recipe_key(variant) -> str | None:
    """What the wheelhouse is made from (pins, Python, and every platform's tag and constraints): names its
    folders and images."""
    if not variant.wheelhouse:
        return None
    w = variant.wheelhouse

    def parts(platform):
        tag, constraints = recipe(variant, platform)
        return [tag, (ROOT / "images" / constraints).read_text() if constraints else ""]

    recipe_ = [requirements(variant), w["python_version"], *parts(None)]  # a one-platform key is as it always was
    recipe_ += [[platform, *parts(platform)] for platform in sorted(w.get("other_platforms") or {})]
    return hashlib.sha256(json.dumps(recipe_).encode()).hexdigest()[:16]


def suffix(variant, platform: str | None) -> str:
    """'' for the home platform, '-<arch>' for another (its folder and image sit beside the home one)."""
    if platform is None or platform == home_platform(variant):
        return ""
    return "-" + platform.rpartition("/")[2]


def image_ref(variant, platform: str | None = None) -> str | None:
    """The local image holding the wheelhouse at its root. Pure: the rendered Dockerfile names the home one."""
    key = recipe_key(variant)
    return f"miles-wheelhouse:{variant.family}-{key}{suffix(variant, platform)}" if key else None


def folder(variant, platform: str | None = None) -> Path | None:
    """The wheelhouse folder of `variant`'s recipe for `platform` on this host (`.cache/wheelhouse/`), or None when
    the family has none. Pure: the folder may not exist (yet)."""
    key = recipe_key(variant)
    return CACHE / f"{variant.family}-{key}{suffix(variant, platform)}" if key else None


def ensure_wheelhouse(variant, log=print, scope=None, platform: str | None = None) -> Path | None:
    """Download once per recipe; a stamp records what the folder holds. The download goes into a private folder
    that is renamed into place only when complete, so two builds at once never see a half-filled wheelhouse, and
    a failed or interrupted download leaves nothing behind (the private folder belongs to `scope`, the command's
    clean-up scope, or to a scope of its own)."""
    if not variant.wheelhouse:
        return None
    reqs = requirements(variant)
    py = variant.wheelhouse["python_version"]
    plat, constraints_name = recipe(variant, platform)
    constraints = ROOT / "images" / constraints_name
    dest = folder(variant, platform)
    assert dest is not None  # the variant has a wheelhouse
    if (dest / ".complete").exists():
        return dest
    with scope_or_own(scope) as own:
        tmp = own.mkdtemp(f".partial-{dest.name}-", CACHE)
        tmp.chmod(0o755)  # it becomes the wheelhouse image's root folder
        _download(reqs, py, plat, constraints, tmp, log, dest)
        if dest.is_dir() and not (dest / ".complete").exists():
            shutil.rmtree(dest)  # a half-filled folder left by an older toolkit
        try:
            os.rename(tmp, dest)
        except OSError as e:
            if not (dest / ".complete").exists():
                raise BuildFailed(f"wheelhouse: cannot move the download into {dest}: {e}") from None
            log(f"wheelhouse: {dest.relative_to(ROOT)} was completed meanwhile by another build; using it")
        own.remove(tmp)
    return dest


def _download(reqs, py, plat, constraints: Path, tmp: Path, log, dest: Path) -> None:
    """`pip download` of the pin set into `tmp` (every line, --no-deps), with the set itself as constraints.txt,
    stamped `.complete` at the end."""
    log(
        f"wheelhouse: downloading the pin set {constraints.name} for cp{py.replace('.', '')} {plat} "
        f"into {dest.relative_to(ROOT)}"
    )
    stamp = tmp / ".complete"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--progress-bar",
        "off",  # one line per file (condensed below), never a bar redrawn in a log
        "--only-binary=:all:",
        "--no-deps",
        "--dest",
        str(tmp),
        "--python-version",
        py,
        "--implementation",
        "cp",
        "--requirement",
        str(constraints),
    ]
    for tag in platform_tags(plat):
        cmd += ["--platform", tag]
    rc, tail = _pip_download(cmd, _line_count(constraints), log)
    if rc != 0:
        raise BuildFailed("wheelhouse download failed:\n" + "\n".join(tail))
    shutil.copyfile(constraints, tmp / "constraints.txt")
    stamp.write_text("\n".join(reqs) + "\n")


def _line_count(constraints: Path) -> int | None:
    """The requirement lines of a constraints file (one file each, with --no-deps), for `37/120 files`."""
    try:
        text = constraints.read_text()
    except OSError:
        return None
    return sum(1 for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "-"))) or None


def _pip_download(cmd: list, total: int | None, log) -> tuple:
    """Run `pip download`, its output condensed to `  wheelhouse: 37/120 files, 1.2 GB` lines and a heartbeat while
    a big file is fetched (toolkit/progress.py); (exit code, its last lines)."""
    import signal

    from toolkit.engine.docker_engine import stop_child
    from toolkit.errors import Interrupted
    from toolkit.progress import Heartbeat, PipDownloadLines, ticking

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True
    )
    assert proc.stdout is not None  # stdout=PIPE
    beat = Heartbeat(log, lambda: files.describe())
    files = PipDownloadLines(beat.say, total)
    try:
        with ticking(beat):
            for line in proc.stdout:
                files.feed(line)
            rc = proc.wait()
        files.close()
    except (KeyboardInterrupt, Interrupted) as e:
        stop_child(proc, getattr(e, "signum", signal.SIGINT))
        raise
    finally:
        proc.stdout.close()
    return rc, list(files.tail)


def ensure_wheelhouse_image(client, variant, log=print, scope=None, platform: str | None = None) -> str | None:
    """Make the wheelhouse image once per recipe and platform (`docker import` of the folder). Builds bind-mount it
    with `--mount=from=`, so half a gigabyte of wheels never travels in the build context."""
    import docker.errors

    ref = image_ref(variant, platform)
    if ref is None:
        return None
    try:
        client.images.get(ref)
        return ref
    except docker.errors.ImageNotFound:
        pass
    folder = ensure_wheelhouse(variant, log=log, scope=scope, platform=platform)
    assert folder is not None  # the variant has a wheelhouse (its image ref is set)
    engine.import_tree(
        folder, ref, ("--exclude=./.complete",), platform=platform, labels={LOCAL_IMAGE_LABEL: "wheelhouse"}
    )
    log(f"wheelhouse image {ref} made from {folder.relative_to(ROOT)}")
    return ref
