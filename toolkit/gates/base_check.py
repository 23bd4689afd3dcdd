"""Check a base file against the image it describes: a standard-library probe, run by the base's own python in a
throwaway container, prints the image's real facts as JSON, and `compare` turns each recorded fact that differs
into one line. Facts recorded as null are not checked (nothing says what they should be).

    from toolkit.spec.bases import load_base
    differences = check_base(docker.from_env(), load_base("lmsysorg/sglang:v0.5.16"))
"""

from __future__ import annotations

import json
import re

from toolkit.errors import BuildFailed, UsageError, short

RUN_LABEL = "io.miles.base-check"  # marks the throwaway container a check makes (it is always removed)

# Run as `python -c PROBE ARGS_JSON`; ARGS_JSON is {"paths": [...]}, the paths whose existence is reported. It
# never imports torch or sglang: versions come from distribution metadata and torch's own version.py, read as text.
PROBE = r"""
import ast, json, os, re, subprocess, sys, sysconfig
from importlib import metadata, util

args = json.loads(sys.argv[1])
out = {
    "python_version": "%d.%d" % sys.version_info[:2],
    "python_full_version": "%d.%d.%d" % sys.version_info[:3],
    "glibc": (os.confstr("CS_GNU_LIBC_VERSION") or " ").split(" ")[-1],
    "site_packages": sysconfig.get_paths()["purelib"],
}
dists = {}
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name:
        dists[re.sub(r"[-_.]+", "-", name).lower()] = d.version
out["distributions"] = dists

torch = {}
spec = util.find_spec("torch")
if spec is not None and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError):
        tree = None
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("__version__", "cuda", "hip"):
                    torch[target.id] = node.value.value
out["torch_version"] = torch.get("__version__")
out["torch_cuda"] = torch.get("cuda")
out["torch_hip"] = torch.get("hip")

home = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else None)
out["cuda_home"] = home
nvcc = os.path.join(home, "bin", "nvcc") if home else None
out["nvcc_version"] = None
if nvcc and os.access(nvcc, os.X_OK):
    try:
        text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"release [0-9.]+, V([0-9.]+)", text)
        out["nvcc_version"] = m.group(1) if m else None
    except (OSError, subprocess.SubprocessError):
        pass
out["rocm_version"] = None
for info in ("/opt/rocm/.info/version",):
    try:
        out["rocm_version"] = open(info, encoding="utf-8").read().strip() or None
    except OSError:
        pass
out["paths"] = {p: os.path.exists(p) for p in args.get("paths", [])}
print(json.dumps(out, sort_keys=True))
"""


def probe_script() -> str:
    """The probe's source: standard library only, so it runs in any base before anything is installed."""
    return PROBE


def probe_paths(base) -> list:
    """The paths whose existence the base file records."""
    return [p for p in (base.driver_stub, base.sglang_tree, base.cuda_home, base.rocm_path, base.site_packages) if p]


def _release_matches(recorded: str, observed: str | None) -> bool:
    """`13.0` matches `13.0.88`, `7.2` matches `7.2.26015-fc0010cf6`: the recorded release is a prefix, by parts."""
    if observed is None:
        return False
    parts = recorded.split(".")
    return re.split(r"[.\-+]", observed)[: len(parts)] == parts


def _public(version: str | None) -> str | None:
    """A version without its local part: torch's `2.11.0+cu130` is release 2.11.0."""
    return version.split("+", 1)[0] if version else version


def compare(base, observed: dict) -> list[str]:
    """One line per recorded fact that the image contradicts, naming the fact, the record and what the image has."""
    diffs = []

    def differ(key: str, recorded, seen) -> None:
        diffs.append(f"{base.image}: {key}: recorded {recorded!r}, the image has {seen!r}")

    exact = [
        ("python.version", base.python_version, observed.get("python_version")),
        ("python.full_version", base.python_full_version, observed.get("python_full_version")),
        ("python.site_packages", base.site_packages, observed.get("site_packages")),
        ("torch.version", base.torch_version, _public(observed.get("torch_version"))),
        ("cuda.home", base.cuda_home, observed.get("cuda_home")),
    ]
    for key, recorded, seen in exact:
        if recorded is not None and recorded != seen:
            differ(key, recorded, seen)
    releases = [
        ("torch.cuda", base.torch_cuda, observed.get("torch_cuda")),
        ("torch.hip", base.torch_rocm, observed.get("torch_hip")),
        ("cuda.nvcc", base.nvcc_version, observed.get("nvcc_version")),
        ("rocm.version", base.rocm_version, observed.get("rocm_version")),
    ]
    for key, recorded, seen in releases:
        if recorded is not None and not _release_matches(recorded, seen):
            differ(key, recorded, seen)
    glibc = observed.get("glibc") or ""
    if base.glibc is not None and tuple(map(int, re.findall(r"\d+", glibc))) < tuple(map(int, base.glibc.split("."))):
        differ("glibc", f"at least {base.glibc}", glibc)
    dists = observed.get("distributions") or {}
    if base.sglang_version is not None and dists.get("sglang") != base.sglang_version:
        differ("sglang.version", base.sglang_version, dists.get("sglang"))
    for name, version in sorted(base.distributions.items()):
        seen = dists.get(name)
        if _public(seen) != version:
            differ(f"distributions.{name}", version, seen)
    paths = observed.get("paths") or {}
    for key, path in (
        ("cuda.driver_stub", base.driver_stub),
        ("sglang.tree", base.sglang_tree),
        ("rocm.path", base.rocm_path),
    ):
        if path is not None and not paths.get(path):
            diffs.append(f"{base.image}: {key}: recorded {path!r}, which the image does not have")
    return diffs


def check_base(client, base, image: str | None = None, platform: str | None = None) -> list[str]:
    """Run the probe in a container of `image` (default: the base's own reference) with the base's python, no
    network, removed afterwards, and return compare()'s lines. Raises UsageError when the image is not on this
    engine, BuildFailed when the probe cannot run or prints no facts."""
    import docker.errors

    ref = image or base.image
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise UsageError(f"image {ref} is not present on this engine (pull or load it first)") from None
    args = json.dumps({"paths": probe_paths(base)})
    container = client.containers.create(
        ref,
        command=["-c", probe_script(), args],
        entrypoint=[base.python],
        network_disabled=True,
        user="0",
        labels={RUN_LABEL: base.image},
        platform=platform,
    )
    try:
        try:
            container.start()
        except docker.errors.APIError as e:
            reason = short(str(e.explanation or e), 200, quote=False)
            raise BuildFailed(f"base check of {ref}: cannot run {base.python}, the base's python ({reason})") from None
        rc = container.wait(timeout=600).get("StatusCode", 1)
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    lines = stdout.strip().splitlines()
    try:
        observed = json.loads(lines[-1]) if rc == 0 and lines else None
    except ValueError:
        observed = None
    if not isinstance(observed, dict):
        tail = short(stderr.strip()[-300:] or stdout.strip()[-300:], 320, quote=False)
        raise BuildFailed(f"base check of {ref}: the probe failed (exit {rc}): {tail}")
    return compare(base, observed)


if __name__ == "__main__":  # `python3 -m toolkit.gates.base_check IMAGE [LOCAL_REF]` on a host that has the image
    import sys

    import docker

    from toolkit.errors import ToolkitError
    from toolkit.spec.bases import load_base

    try:
        found = check_base(docker.from_env(), load_base(sys.argv[1]), image=sys.argv[2] if len(sys.argv) > 2 else None)
    except ToolkitError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    for line in found:
        print(line)
    sys.exit(1 if found else 0)
