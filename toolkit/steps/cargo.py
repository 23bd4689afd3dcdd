"""The `cargo` step kind (its contract is the class docstring)."""

from __future__ import annotations

import re

from toolkit.errors import short
from toolkit.plan import artifacts as art
from toolkit.spec.schema import STR_LIST, STR_MAP
from toolkit.spec.values import PLATFORM_MACHINES, check_abs_path, check_rel_path
from toolkit.steps.base import Kind, need_artifact, need_component, run


class Cargo(Kind):
    """`cargo: COMPONENT` with `toolchain: {ARCH: ARTIFACT}` — builds a Rust component with a pinned toolchain.

    Reads: the component; `toolchain` (per `uname -m`, x86_64 and/or aarch64: a family artifact that is Rust's
    standalone release tarball, `rust-<version>-<triple>.tar.gz`, locked by digest); `bins` (binaries built with
    `cargo build --release` and installed in `to`); `features` (cargo features, also passed to maturin);
    `python` (a folder of the tree with a maturin `pyproject.toml`: its wheel is built and pip installed over any
    copy of the same version, with maturin from the variant's pins, no build isolation, no deps).
    Leaves: the binaries and the Python package. The toolchain is unpacked, used and removed in the same step, so
    neither it nor the crate cache reaches a layer.
    May not: fetch a toolchain by script (rustup's `curl | sh`): only the locked tarball runs.
    """

    key = "cargo"
    order = 8
    main = str
    options = {"toolchain": STR_MAP, "bins": STR_LIST, "features": STR_LIST, "to": str, "python": str}
    ARCHES = ("x86_64", "aarch64")

    def check(self, step, v, where):
        need_component(step["value"], v, where, "cargo")
        toolchain = step.get("toolchain") or {}
        if not toolchain:
            raise where.error("toolchain", "name the Rust toolchain artifact per machine (x86_64, aarch64)")
        for arch, name in toolchain.items():
            if arch not in self.ARCHES:
                raise where.error(f"toolchain.{short(arch, 40, quote=False)}", f"one of {', '.join(self.ARCHES)}")
            record = need_artifact(name, v, where, f"toolchain.{arch}")
            if art.is_pending(record):
                raise where.error(f"toolchain.{arch}", f"artifact {name} is pending in the lock; lock it first")
            if not re.fullmatch(rf"rust-[0-9][0-9.]*-{arch}-unknown-linux-gnu\.tar\.gz", art.file_name(record)):
                raise where.error(f"toolchain.{arch}", f"not Rust's {arch} release: {short(art.file_name(record))}")
        for platform in v.get("platforms") or ():
            if self.MACHINES.get(platform) not in toolchain:
                raise where.error("toolchain", f"no toolchain for the variant's platform {platform}")
        for opt in ("bins", "features"):
            for i, word in enumerate(step.get(opt, [])):
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", word):
                    raise where.error(f"{opt}[{i}]", f"a cargo name is letters, digits, '_', '-': {short(word)}")
        if step.get("bins"):
            check_abs_path(step.get("to", ""), where.file, f"{where.key}.to")
        if "python" in step:
            check_rel_path(step["python"], where.file, f"{where.key}.python")
            if "maturin" not in (v.get("pip") or {}):
                raise where.error("python", "a maturin build needs a `maturin` pin in the variant's `pip` table")
        if not step.get("bins") and "python" not in step:
            raise where.error("", "nothing to build: give `bins` and/or `python`")

    def uses(self, step, v):
        return {("components", step["value"])} | {("artifacts", n) for n in (step.get("toolchain") or {}).values()}

    MACHINES = PLATFORM_MACHINES

    def view(self, step, v):
        # Only the toolchains of the variant's platforms are fetched (a tarball is hundreds of MB).
        machines = {self.MACHINES.get(p) for p in v.get("platforms") or ()}
        tools = [
            (arch, name, art.file_name(v["artifacts"][name]))
            for arch, name in sorted(step["toolchain"].items())
            if arch in machines
        ]
        return dict(step, name=step["value"], tools=tools, reads_artifacts=[n for _, n, _ in tools])

    def lines(self, step, out):
        """Rust's standalone release, picked by the machine (`uname -m`), unpacked and installed under /tmp for this
        step only; the crates come from their registry (the host's CA bundle as for pip), the build tree is a mount."""
        tree = "/tmp/src/" + step["name"]
        mounts = [out.source_mount(step["name"], tree)] + [out.artifact_mount(name) for _, name, _ in step["tools"]]
        feature_list = ",".join(step.get("features", []))
        features = f"--features {out.word(feature_list)}" if feature_list else ""
        body = [out.index_env(), 'case "$(uname -m)" in']
        for arch, name, file in step["tools"]:
            body.append(f"  {arch}) toolchain={out.word(f'{out.artifact_dir}/{name}/{file}')} ;;")
        body += [
            '  *) echo "no Rust toolchain artifact for $(uname -m)" >&2; exit 1 ;;',
            "esac &&",
            'mkdir /tmp/rust-dist && tar -xzf "$toolchain" -C /tmp/rust-dist --strip-components=1 &&',
            "/tmp/rust-dist/install.sh --prefix=/tmp/rust --disable-ldconfig >/dev/null &&",
            'export PATH="/tmp/rust/bin:$PATH" CARGO_HOME=/tmp/cargo-home CARGO_TARGET_DIR=/tmp/cargo-target &&',
            'if [ -n "${PIP_CERT:-}" ]; then export CARGO_HTTP_CAINFO="$PIP_CERT"; fi &&',
        ]
        if step.get("bins"):
            bins = " ".join(f"--bin {out.word(b)}" for b in step["bins"])
            manifest = out.word(tree + "/Cargo.toml")
            body.append(f"cargo build --release --manifest-path {manifest} {bins} {features} &&")
            for b in step["bins"]:
                body.append(
                    f"install -m 0755 {out.word('/tmp/cargo-target/release/' + b)} {out.word(step['to'] + '/' + b)} &&"
                )
        if "python" in step:
            maturin = f"MATURIN_PEP517_ARGS={out.word('--features ' + feature_list)} " if feature_list else ""
            body.append(
                f"{maturin}pip install {out.pip_opts()} --force-reinstall --no-deps --no-build-isolation"
                f" {out.word(tree + '/' + step['python'])} &&"
            )
        body.append("rm -rf /tmp/rust-dist /tmp/rust /tmp/cargo-home /tmp/cargo-target")
        return [run(" ".join(mounts) + " " + out.index_mount(), body)]
