"""Make the stand-in for a GPU variant's base, which this host cannot pull (`build.py build --stand-in-base`).

The stand-in is made from the base file (images/bases/) and the variant's closure in its lock, in two images:

1. `miles-standin-os:SUITE`: a Debian root from debootstrap, the oldest suite whose C library is at least the
   base's (`glibc`), with the compilers and the libraries a CUDA development base carries that the closure's
   wheels link (RDMA, NUMA, curl for mooncake).
2. `miles-standin:VARIANT-HASH`, from templates/stand_in_base.Dockerfile.j2 on it: this host's CPython of the
   base's minor version (Debian has none of 3.12; the index has no interpreter), the base's own distributions from
   the closure by sha256, CUDA_HOME assembled from the closure's CUDA wheels with a driver stub generated from its
   `cuda.h`, cuDNN's and NCCL's headers from the closure's wheels in /usr/include (where the base's apt dev
   packages put theirs), and empty apt packages under the names the variant's steps remove.

Every way it differs from the real base is a line of `differences`, printed by each build and kept in the image's
labels. The tag carries the hash of everything that went into it, so a changed closure makes a new stand-in.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import types
from dataclasses import dataclass
from pathlib import Path

from toolkit.engine import base_image
from toolkit.engine import docker_engine as engine
from toolkit.engine.invocation import Invocation
from toolkit.errors import UsageError
from toolkit.render.context import LOCAL_IMAGE_LABEL
from toolkit.steps import applies, expand

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "templates" / "stand_in_base.Dockerfile.j2"
TOOLS = ("driver_stub.py", "apt_placeholders.py", "wheel_headers.py")  # image_tools/ scripts the stand-in's steps run
# Debian suites and their C library: the stand-in takes the oldest at least as new as the base's.
SUITES = (("bookworm", "2.36"), ("trixie", "2.41"))
# What a CUDA development base carries beyond minbase that the steps and the closure's wheels use: compilers and
# git (the steps), a CPython's own libraries, and the libraries mooncake's and the RDMA wheels link.
PACKAGES = {
    "bookworm": ("libssl3", "libreadline8", "libgdbm6", "libcurl4", "librdmacm1", "libtirpc3"),
    "trixie": ("libssl3t64", "libreadline8t64", "libgdbm6t64", "libcurl4t64", "librdmacm1t64", "libtirpc3t64"),
}
COMMON = (
    "ca-certificates", "git", "gcc", "g++", "make", "libc6-dev", "libffi8", "libsqlite3-0", "libncursesw6",
    "libbz2-1.0", "liblzma5", "zlib1g", "libexpat1", "libuuid1", "libnsl2", "libibverbs1", "ibverbs-providers",
    "libnuma1",
)  # fmt: skip
# The closure's wheels whose headers stand in for the base's apt dev packages (libcudnn9-dev, libnccl-dev).
HEADER_WHEELS = ("nvidia-cudnn-cu{major}", "nvidia-nccl-cu{major}")
REF_LABEL = "io.miles.stand-in"  # on a stand-in build's image: the stand-in base it was built on
DIFFERENCES_LABEL = "io.miles.stand-in.differences"  # there and on the stand-in: how it differs from the real base


@dataclass(frozen=True)
class StandInBase:
    ref: str
    differences: tuple  # one line each


def suite_for(glibc: str | None) -> tuple:
    """(suite, its glibc) for a base whose C library is at least `glibc` (None: the newest suite)."""
    want = tuple(int(p) for p in (glibc or "0").split("."))
    for suite, has in SUITES:
        if tuple(int(p) for p in has.split(".")) >= want:
            return suite, has
    raise UsageError(f"no Debian suite here has a C library as new as the base's glibc {glibc}")


def host_python(version: str) -> tuple:
    """(prefix, full version) of this host's CPython `version` (X.Y): `pythonX.Y` on PATH, else pyenv's."""
    candidates = [shutil.which(f"python{version}")]
    candidates += [
        str(p / "bin" / f"python{version}") for p in sorted(Path.home().glob(f".pyenv/versions/{version}.*"))
    ]
    for exe in filter(None, candidates):
        try:
            out = subprocess.run(
                [exe, "-c", "import sys, platform; print(sys.base_prefix); print(platform.python_version());"
                 "print(sys.implementation.name)"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = out.stdout.split()
        if out.returncode == 0 and len(lines) == 3 and lines[2] == "cpython" and lines[1].startswith(version + "."):
            prefix = Path(lines[0])
            if (prefix / "lib" / f"libpython{version}.so.1.0").is_file():
                return prefix, lines[1]
    raise UsageError(
        f"no CPython {version} built as a shared library on this host (pythonX.Y on PATH or ~/.pyenv/versions): "
        "the stand-in base needs the base's Python minor version"
    )


def base_lines(record: dict) -> list[str]:
    """`NAME==VERSION --hash=...` for every distribution the real base holds of a closure record."""
    from toolkit.lock.pip_closure import installs

    image = set(installs(record))
    return [requirement(name, pkg) for name, pkg in sorted(record["packages"].items()) if name not in image]


def requirement(name: str, pkg: dict) -> str:
    """A closure package as a hash-checked requirement line: `NAME==VERSION --hash=sha256:...`."""
    return f"{name}=={pkg['version']} " + " ".join(f"--hash=sha256:{sha}" for sha in sorted(pkg["files"].values()))


def header_lines(record: dict, cuda_major: str) -> list[str]:
    """`NAME==VERSION --hash=...` of the closure's wheels whose headers the stand-in puts in /usr/include."""
    names = [n.format(major=cuda_major) for n in HEADER_WHEELS]
    missing = [n for n in names if n not in record["packages"]]
    if missing:
        raise UsageError(f"the closure holds no {', '.join(missing)}: no headers for the stand-in's /usr/include")
    return [requirement(n, record["packages"][n]) for n in names]


def removed_apt(variant) -> list[str]:
    """The apt names the variant's steps remove from the real base (`replaces_apt`), expanded."""
    return sorted(
        {expand(n, variant.args) for s in variant.steps if applies(s, variant.args) for n in s.get("replaces_apt", ())}
    )


def differences(base, suite: str, glibc: str, python: str, cuda_major: str, held: int) -> tuple:
    """How the stand-in differs from the real base, one line each (the base file's facts beside the stand-in's)."""
    return (
        f"OS: Debian {suite} (glibc {glibc}) in place of the base's OS (glibc {base.glibc or 'unrecorded'} or newer)",
        f"Python: this host's CPython {python} in /usr/local in place of the base's Python "
        f"{base.python_full_version or base.python_version} (site-packages, not dist-packages)",
        f"the base's {held} distributions from the index by the lock's sha256 (sglang {base.sglang_version} as "
        f"the index's wheel: no {base.sglang_tree or 'sglang'} checkout)",
        f"CUDA toolkit: /usr/local/cuda from the closure's CUDA {cuda_major} wheels (nvcc, runtime, headers), no "
        "system toolkit; lib64/stubs/libcuda.so generated from its cuda.h (every entry point answers 'stub')",
        f"dev headers: cuDNN's and NCCL's from the closure's cu{cuda_major} wheels in /usr/include, where the base's "
        "apt dev packages put theirs (they stay when a step removes the apt cuDNN)",
        "apt: the packages the steps remove from the base are empty placeholders of the same names",
    )


def closure_record(variant) -> dict:
    """The variant's closure record in its family's lock, for this host's platform."""
    from toolkit.lock import file as lock_file
    from toolkit.spec.bases import load_base

    platform = base_image.host_platform()
    python = load_base(variant.base).python_version
    spec = Path(variant.spec_file)
    lock = lock_file.load(lock_file.lock_path(spec), spec.name, variant.family) or {}
    record = ((lock.get("closure") or {}).get(variant.name) or {}).get(f"py{python} {platform}")
    if not record or not record.get("packages"):
        raise UsageError(f"{variant.name}: its lock holds no closure for {platform} (run `build.py lock`)")
    return record


def held(variant) -> set:
    """The distributions the stand-in base holds for `variant` (what the real base holds of its closure)."""
    return {line.split("==", 1)[0] for line in base_lines(closure_record(variant))}


def ensure(client, variant, log=print, scope=None, pip_ca=None) -> StandInBase:
    """The stand-in base of `variant` for this host's platform, made when missing; its reference and differences."""
    import docker.errors
    import jinja2

    from toolkit.spec.bases import load_base

    base = load_base(variant.base)
    platform = base_image.host_platform()
    record = closure_record(variant)
    lines = base_lines(record)
    suite, glibc = suite_for(base.glibc)
    prefix, python = host_python(base.python_version)
    cuda_major = str(variant.args.get("CUDA_MAJOR") or (base.torch_cuda or "13").split(".")[0])
    files = {
        "Dockerfile": jinja2.Template(TEMPLATE.read_text(), keep_trailing_newline=True).render(
            os_image=f"miles-standin-os:{suite}", python_version=base.python_version, cuda_major=cuda_major
        ),
        "base.txt": "\n".join(lines) + "\n",
        "headers.txt": "\n".join(header_lines(record, cuda_major)) + "\n",
        "apt-placeholders.txt": "\n".join(removed_apt(variant)) + "\n",
        **{f"tools/{t}": (ROOT / "image_tools" / t).read_text() for t in TOOLS},
    }
    digest = hashlib.sha256(json.dumps([files, python, str(prefix)], sort_keys=True).encode()).hexdigest()[:12]
    ref = f"miles-standin:{variant.name}-{digest}"
    found = differences(base, suite, glibc, python, cuda_major, len(lines))
    try:
        client.images.get(ref)
        return StandInBase(ref, found)
    except docker.errors.ImageNotFound:
        pass
    os_ref = f"miles-standin-os:{suite}"
    try:
        client.images.get(os_ref)
    except docker.errors.ImageNotFound:
        recipe = {"suite": suite, "variant": "minbase", "include": [*COMMON, *PACKAGES[suite]]}
        base_image.make_image(os_ref, recipe, None, log, scope)
    folder = ROOT / "build" / "standin" / f"{variant.name}-{digest}"
    if folder.exists():
        shutil.rmtree(folder)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    log(f"stand-in base {ref}: {base.image}'s {len(lines)} distributions on Debian {suite}, CPython {python}")
    invocation = Invocation(
        context=folder,
        dockerfile=folder / "Dockerfile",
        platforms=(platform,),
        build_args=(("SOURCE_DATE_EPOCH", str(variant.source_date_epoch)),),
        labels=((LOCAL_IMAGE_LABEL, "base"), (DIFFERENCES_LABEL, " | ".join(found))),
        contexts=(("python", str(prefix)),),
        secrets=(("pip-ca", str(pip_ca)),) if pip_ca else (),
        tags=(ref,),
    )
    shown = types.SimpleNamespace(
        name=f"stand-in base of {variant.name}", progress="auto", variant=types.SimpleNamespace(artifacts={})
    )
    image_id = engine.build(shown, invocation, out=log)
    engine.tag(client, image_id, ref)
    shutil.rmtree(folder, ignore_errors=True)
    return StandInBase(ref, found)
