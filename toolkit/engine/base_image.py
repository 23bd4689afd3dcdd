"""Make a family's base image locally when it is missing (build hosts here reach no registry).

debootstrap builds a root file system from Debian packages (its default mirror, or the one the machine's apt
sources name); `docker import` turns it into an image with exactly the spec's tag.
"""

from __future__ import annotations

import platform as platform_mod
import shutil
import signal
import subprocess
import sys
import tempfile

from toolkit.cleanup import scope_or_own
from toolkit.engine import docker_engine as engine
from toolkit.errors import BuildFailed, Interrupted, UsageError
from toolkit.progress import DebootstrapLines, Heartbeat, ticking
from toolkit.render.context import LOCAL_IMAGE_LABEL
from toolkit.spec.values import PLATFORM_MACHINES

ROOTFS_PREFIX = "miles-rootfs-"  # the debootstrap root's folder in the temp dir (removed once imported)


def debootstrap(cmd: list, log=print) -> subprocess.CompletedProcess:
    """Run debootstrap in its own process group: on SIGINT/SIGTERM the whole group (dpkg, tar, ...) is stopped and
    waited for before the caller removes the root it was writing. Its output is streamed to `log` condensed, one
    line per stage (toolkit/progress.py), with a heartbeat while a stage is quiet; the result's stdout holds the
    last lines of it (stderr is merged: a failed run's error shows them)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True
    )
    assert proc.stdout is not None  # stdout=PIPE
    beat = Heartbeat(log, lambda: stages.describe())
    stages = DebootstrapLines(beat.say)
    try:
        with ticking(beat):
            for line in proc.stdout:
                stages.feed(line)
            stages.close()
            proc.wait()
    except (KeyboardInterrupt, Interrupted) as e:
        engine.stop_child(proc, getattr(e, "signum", signal.SIGINT))
        raise
    finally:
        proc.stdout.close()
    return subprocess.CompletedProcess(cmd, proc.returncode, "\n".join(stages.tail) + "\n", "")


def host_platform() -> str:
    machine = platform_mod.machine()
    return next((p for p, m in PLATFORM_MACHINES.items() if m == machine), f"linux/{machine}")


def base_ref(variant, platform: str | None = None) -> str:
    """The local tag of the base for `platform`: the spec's own tag for this host's platform, `<tag>-<arch>` for
    another one (made with debootstrap --arch, its second stage under qemu-user's binfmt handler)."""
    if platform is None or platform == host_platform():
        return variant.base
    return f"{variant.base}-{platform.rpartition('/')[2]}"


def ensure_base(client, variant, log=print, scope=None, platform: str | None = None) -> bool:
    """Return True when the base had to be made. Raises when it is missing and cannot be made here. The root file
    system is made in a folder of `scope` (the command's clean-up scope) and removed once imported."""
    import docker.errors

    ref = base_ref(variant, platform)
    foreign = ref != variant.base
    try:
        client.images.get(ref)
        return False
    except docker.errors.ImageNotFound:
        pass
    recipe = variant.base_build.get("debootstrap")
    if not recipe:
        raise BuildFailed(
            f"base image {ref} is not present and this machine cannot pull it; "
            f"load it first (docker load / docker pull on a connected machine)"
        )
    make_image(ref, recipe, platform if foreign else None, log, scope)
    return True


def make_image(ref: str, recipe: dict, platform: str | None = None, log=print, scope=None) -> None:
    """debootstrap `recipe` (`suite`, `variant`, `include`) into a folder of `scope` and import it as `ref`
    (`platform`: another machine's, under qemu-user); the folder is removed once imported."""
    if shutil.which("debootstrap") is None:
        raise UsageError("debootstrap is not installed (run ci/setup.sh)")
    suite, flavour = recipe.get("suite", "bookworm"), recipe.get("variant", "minbase")
    include = recipe.get("include") or []
    extra = ", " + ",".join(include) if include else ""
    arch = ["--arch=" + platform.rpartition("/")[2]] if platform else []
    log(f"base image {ref} missing: debootstrap {' '.join(arch + [suite])} ({flavour}{extra})")
    with scope_or_own(scope) as own:
        rootfs = own.mkdtemp(ROOTFS_PREFIX, tempfile.gettempdir())
        cmd = ["debootstrap", *arch, f"--variant={flavour}"]
        if include:
            cmd.append("--include=" + ",".join(include))
        cmd += [suite, str(rootfs)]
        run = debootstrap(cmd, log)
        if run.returncode != 0:
            tail = "\n".join(run.stdout.splitlines()[-20:])
            raise BuildFailed(f"debootstrap failed ({run.returncode}):\n{tail}")
        # Keep the image small and its apt state clean.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        engine.import_tree(
            rootfs,
            ref,
            ("--numeric-owner",),
            platform=platform,
            labels={LOCAL_IMAGE_LABEL: "base"},
        )
        own.remove(rootfs)
    log(f"base image {ref} made locally")


if __name__ == "__main__":  # `python3 -m toolkit.engine.base_image smoke` for a manual run
    import docker

    from toolkit.spec.catalog import load_catalog

    ensure_base(docker.from_env(), load_catalog().resolve(sys.argv[1] if len(sys.argv) > 1 else "smoke"))
