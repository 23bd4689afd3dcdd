"""Each GPU variant's locked closure as a PEP 751 lock file: `python3 -m ci.export_pylock DIR [VARIANT...]`.

The `closure` of a GPU family's lock (toolkit/lock/pip_closure.py) is the variant's whole Python environment, the
base's distributions included: each distribution at its version, with the sha256 of each file the index offers for
it on the base's Python and platform. This writes it as DIR/pylock.<variant>.toml (a variant that builds several
platforms: one pylock.<variant>-<arch>.toml each; PEP 751 allows no other name), which `uv pip install -r` and
`uv pip sync` read (with `--preview-features pylock`: uv calls reading one experimental).
The file is uv's own writer's (`uv pip compile --no-deps --format pylock.toml` of the exact pins, for the base's
Python and platform, against the index this host's pip is configured with, as `build.py lock` resolves) and is
checked before it is written: every distribution at its locked version with exactly the locked files and digests
(uv takes the digests from the index, so an index that serves other files now fails, naming the first). What the
closure leaves out is not in it: pins pending in the lock (an index this host could not reach) and what it leaves to
the base (a ROCm base's own torch and kernels); a base's own build of a recorded distribution (a CUDA 12 base's
torch) is in it as the index builds it. DIR is the caller's; nothing here is committed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.utils import canonicalize_name

from toolkit.errors import ToolkitError, UsageError
from toolkit.lock import file as lock_file
from toolkit.lock import pip_closure, pip_index
from toolkit.spec import bases
from toolkit.spec.catalog import IMAGES_DIR, load_catalog, path_label


def file_name(variant: str, platform: str, several: bool) -> str:
    """`pylock.<variant>.toml`, or with the platform's architecture where the variant builds several."""
    return f"pylock.{variant}-{platform.rsplit('/', 1)[-1]}.toml" if several else f"pylock.{variant}.toml"


def files_of(pylock: dict) -> dict:
    """{canonical name: (version, {file name: sha256})} of a pylock.toml: every wheel and sdist it lists."""
    out = {}
    for pkg in pylock.get("packages", []):
        entries = [*(pkg.get("wheels") or []), *([pkg["sdist"]] if "sdist" in pkg else [])]
        files = {pip_closure._file_name(e): e["hashes"]["sha256"] for e in entries}
        out[canonicalize_name(pkg["name"])] = (pkg["version"], files)
    return out


def mismatch(record: dict, pylock: dict) -> str | None:
    """The first distribution whose version or files the pylock holds otherwise than the closure record."""
    locked = {n: (p["version"], p["files"]) for n, p in record["packages"].items()}
    written = files_of(pylock)
    for name in sorted(set(locked) | set(written)):
        if locked.get(name) != written.get(name):
            return f"{name}: locked {locked.get(name)}, the index now {written.get(name)}"
    return None


def export(variant, platform: str, record: dict, index: pip_index.Index, out: Path) -> int:
    """Write one closure record as the pylock.toml `out` (uv's writer), checked against the record; the number
    of distributions. Nothing is written when the check fails (UsageError naming the first difference)."""
    base = bases.load_base(variant.base)
    packages = record["packages"]
    with tempfile.TemporaryDirectory(prefix=pip_closure.TEMP_PREFIX) as tmp:
        pins = Path(tmp, "requirements.txt")
        pins.write_text("".join(f"{n}=={p['version']}\n" for n, p in sorted(packages.items())), encoding="utf-8")
        wheels_only = [n for n, p in sorted(packages.items()) if all(f.endswith(".whl") for f in p["files"])]
        written = Path(tmp, out.name)
        argv = [
            "uv", "pip", "compile", str(pins), "--no-deps", "--format", "pylock.toml", "-o", str(written),
            "--python-version", base.python_version,
            "--python-platform", pip_closure.platform_tag(platform, base.glibc or "2.17"),
            "--index-url", index.url, "--no-header", "--quiet", "--no-progress",
            "--cache-dir", str(Path(tempfile.gettempdir(), "miles-uv-cache")),
            *(word for n in wheels_only for word in ("--only-binary", n)),
        ]  # fmt: skip
        pip_closure._uv(argv, variant, platform, index.cafile, tmp)
        text = written.read_text(encoding="utf-8")
    problem = mismatch(record, tomllib.loads(text))
    if problem:
        raise UsageError(f"pylock of {variant.name} {platform}: {problem} (`build.py lock --check` says what moved)")
    out.write_text(text, encoding="utf-8")
    return len(packages)


def closures(names) -> list:
    """[(variant, platform, closure record, file name)] of the named GPU variants (default: all), from the
    families' locks as committed."""
    catalog = load_catalog()
    gpu = {v.name: v for v in pip_index.gpu_variants(catalog)}
    variants = [catalog.resolve(n) for n in names] if names else list(gpu.values())
    out = []
    for v in variants:
        if v.name not in gpu:
            raise UsageError(f"{v.name}: not a GPU variant (no closure is locked for it); GPU: {', '.join(gpu)}")
        path = lock_file.lock_path(IMAGES_DIR / f"{v.family}.yaml")
        label = path_label(path)
        lock = lock_file.load(path, label, v.family) or {}
        python = bases.load_base(v.base).python_version
        for platform in v.platforms:
            record = ((lock.get("closure") or {}).get(v.name) or {}).get(f"py{python} {platform}")
            if record is None:
                raise UsageError(f"{label}: no closure of {v.name} for py{python} {platform}: run `build.py lock`")
            out.append((v, platform, record, file_name(v.name, platform, len(v.platforms) > 1)))
    taken: dict = {}
    for v, _, _, name in out:
        if taken.setdefault(name, v.name) != v.name:
            raise UsageError(f"{name}: both {taken[name]} and {v.name} would write it")
    return out


def main(argv=None) -> int:
    """Exit 0 written, 2 bad input or a pylock that differs from the lock, 3 the index unreachable."""
    p = argparse.ArgumentParser(prog="python3 -m ci.export_pylock", description=__doc__.splitlines()[0])
    p.add_argument("dir", metavar="DIR", type=Path, help="the folder to write pylock.<variant>.toml into")
    p.add_argument("variants", nargs="*", metavar="VARIANT", help="only these GPU variants (default: all)")
    args = p.parse_args(argv)
    try:
        todo = closures(args.variants)
        args.dir.mkdir(parents=True, exist_ok=True)
        index = pip_index.host_index()
        for v, platform, record, name in todo:
            count = export(v, platform, record, index, args.dir / name)
            print(f"wrote {args.dir / name}: {v.name} {platform}, {count} distributions")
    except ToolkitError as e:
        print(f"export_pylock: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
