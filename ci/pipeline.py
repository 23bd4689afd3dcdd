#!/usr/bin/env python3
"""The CI image pipeline, one entry point for the workflows in .github/workflows/ (and for a person at a shell).

    python3 -m ci.pipeline matrix                       # GitHub matrix: one job per image family, runner by GPU vendor
    python3 -m ci.pipeline render-all --out DIR         # render every target (a broken spec/template fails the PR)
    python3 -m ci.pipeline images (--family F | --target T...) --registry R [--cache REF] [--skip-existing]
                                 [--no-cache] [--reports DIR] [--summary FILE] [--builder NAME] [--jobs N]

`images` is the main-branch flow for a set of targets: `build.py bake` writes the bake file (tags, labels with the
input hash, secrets, cache); a target whose `<variant>-<hash12>` tag is already in the registry is skipped
(--skip-existing); every other target is built with `docker buildx bake --push`, one bake per target, in parallel.
The gates are the last RUN step of every Dockerfile, so a target whose gates fail is never pushed. Each pushed image
is then pulled back *by digest* and verified with `build.py verify` (JUnit + JSON reports), and each platform's SBOM
attached to it in the registry (`build.py sbom --attach`; a builder that can attaches BuildKit's provenance, mode=max,
in the build itself); the digest is what the summary and any later deployment refer to. A markdown summary per
target (status, digest, input hash, timings) goes to $GITHUB_STEP_SUMMARY (or --summary FILE). Exit 0 only when
every target is built and verified, or skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from toolkit.cli import parse
from toolkit.engine import builders, registry
from toolkit.engine.bake import target_name
from toolkit.errors import ToolkitError
from toolkit.plan.build_plan import make_plan
from toolkit.render.context import INPUT_HASH_LABEL
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent

# Runner labels per GPU vendor (the spec's gates.platform says which vendor a family needs). Self-hosted runners
# carry these labels; the BuildKit builder they use is set up once per runner (docs/remote-buildkit.md).
RUNNERS = {
    "rocm": ["self-hosted", "linux", "x64", "gpu-amd"],
    "cuda": ["self-hosted", "linux", "x64", "gpu-nvidia"],
    "cpu": ["self-hosted", "linux", "x64", "miles-cpu"],
}


def out(line: str) -> None:
    print(line, flush=True)


def matrix() -> list:
    catalog = load_catalog()
    jobs = []
    for family, names in sorted(catalog.families.items()):
        vendors = {catalog.variants[n].gates.get("platform", "cpu") for n in names}
        if len(vendors) != 1:
            raise SystemExit(f"pipeline: family {family} mixes gate platforms {sorted(vendors)}")
        vendor = vendors.pop()
        jobs.append({"family": family, "vendor": vendor, "targets": " ".join(names), "runs-on": RUNNERS[vendor]})
    return jobs


def cmd_matrix(args) -> int:
    jobs = json.dumps(matrix())
    out(jobs)
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as f:
            f.write(f"matrix={jobs}\n")
    return 0


def cmd_render_all(args) -> int:
    dest = Path(args.out)
    dest.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog()
    for name, variant in sorted(catalog.variants.items()):
        text = render(make_plan(variant, revision="render"))
        (dest / f"{name}.Dockerfile").write_text(text)
        out(f"rendered {name:<16} {len(text.splitlines()):>4} lines -> {dest / (name + '.Dockerfile')}")
    return 0


@dataclass
class Result:
    target: str
    input_hash: str
    hash_tag: str
    status: str = "pending"  # skipped | built | verified | build-failed | verify-failed
    digest: str = ""
    detail: str = ""
    build_s: float = 0.0
    verify_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("skipped", "verified")


def run_logged(cmd: list, log: Path, timeout: float | None = None) -> tuple:
    """Run a command with its output in `log`; return (exit code, seconds)."""
    started = time.monotonic()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\npipeline: timed out after {timeout}s\n")
            rc = 124
    return rc, time.monotonic() - started


def tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def junit_failure(path: Path, target: str, message: str, text: str) -> None:
    """A JUnit report for a target that never got as far as the gate report (its build failed)."""
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuite name="{escape(target)}" tests="1" failures="1">\n'
        f'  <testcase classname="build.{escape(target)}" name="build">\n'
        f'    <failure message="{escape(message, {chr(34): "&quot;"})}">{escape(text)}</failure>\n'
        "  </testcase>\n</testsuite>\n"
    )


def bake_cmd(builder) -> list:
    """`docker [--context NAME] buildx bake [--builder NAME]`: buildx runs a docker context's builder only as the
    current context (toolkit/engine/builders.py)."""
    if builder is None:
        return ["docker", "buildx", "bake"]
    return ["docker", *builder.docker_args(), "buildx", "bake", *builder.args()]


def build_one(res: Result, bake_file: Path, reports: Path, builder, no_cache: bool) -> Result:
    meta = reports / f"{res.target}.meta.json"
    cmd = [
        *bake_cmd(builder),
        "-f",
        str(bake_file),
        "--push",
        "--progress",
        "plain",
        "--metadata-file",
        str(meta),
    ]
    if no_cache:
        cmd.append("--no-cache")
    if builder is not None and builder.attestations:
        cmd += ["--provenance", "mode=max"]  # BuildKit's full provenance goes into the pushed list with the image
    rc, res.build_s = run_logged(cmd + [target_name(res.target)], reports / f"{res.target}.build.log")
    if rc != 0:
        res.status, res.detail = "build-failed", f"docker buildx bake exited {rc} (gates run inside the build)"
        junit_failure(
            reports / f"{res.target}.junit.xml", res.target, res.detail, tail(reports / f"{res.target}.build.log", 80)
        )
        return res
    res.digest = json.loads(meta.read_text())[target_name(res.target)]["containerimage.digest"]
    res.status = "built"
    # Verify what the registry holds, by digest: pull it back and run the gates in it (the JUnit report), each
    # platform of a multi-platform image on its own (build.py verify pulls each by its digest).
    ref = f"{registry.repository_of(res.hash_tag)}@{res.digest}"
    platforms = json.loads(bake_file.read_text())["target"][target_name(res.target)]["platforms"]
    started = time.monotonic()
    rc = 0
    for platform in platforms:
        stem = res.target if len(platforms) == 1 else f"{res.target}.{platform.replace('/', '-')}"
        rc, _ = run_logged(
            [
                sys.executable,
                "build.py",
                "verify",
                "--target",
                res.target,
                "--image",
                ref,
                "--platform",
                platform,
                "--junit",
                str(reports / f"{stem}.junit.xml"),
                "--json",
                str(reports / f"{stem}.gates.json"),
            ],
            reports / f"{stem}.verify.log",
        )
        if rc != 0:
            res.detail = f"gates failed on {ref} ({platform}; see {stem}.verify.log)"
            break
    if rc == 0:  # each platform's SBOM attached to it in the registry, as `build.py build --push` does
        rc, _ = run_logged(
            [sys.executable, "build.py", "sbom", "--target", res.target, "--image", ref, "--attach"],
            reports / f"{res.target}.sbom.log",
        )
        if rc != 0:
            res.detail = f"the SBOM of {ref} was not attached (see {res.target}.sbom.log)"
    res.verify_s = time.monotonic() - started
    res.status = "verified" if rc == 0 else "verify-failed"
    return res


def summary(results: list, registry_name: str) -> str:
    icon = {"verified": "✅", "skipped": "⏭️"}
    lines = [
        f"### Images → `{registry_name}`",
        "",
        "| target | status | digest | input hash | build | verify |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        digest = f"`{r.digest}`" if r.digest else "–"
        lines.append(
            f"| `{r.target}` | {icon.get(r.status, '❌')} {r.status} | {digest} | `{r.input_hash[:12]}` | "
            f"{r.build_s:.0f} s | {r.verify_s:.0f} s |"
        )
    for r in results:
        lines += ["", f"#### {r.target}: {r.status}", "", f"- tag: `{r.hash_tag}`", f"- input hash: `{r.input_hash}`"]
        if r.digest:
            lines.append(f"- pull by digest: `{registry.repository_of(r.hash_tag)}@{r.digest}`")
        lines.append(f"- timings: build {r.build_s:.1f} s, pull + verify {r.verify_s:.1f} s")
        if r.detail:
            lines.append(f"- {r.detail}")
    return "\n".join(lines) + "\n"


def cmd_images(args) -> int:
    catalog = load_catalog()
    targets = list(args.target or [])
    if args.family:
        if args.family not in catalog.families:
            raise SystemExit(f"pipeline: unknown family {args.family!r}")
        targets += catalog.families[args.family]
    names = list(dict.fromkeys(catalog.resolve(t).name for t in targets))
    if not names:
        raise SystemExit("pipeline: no targets (give --family or --target)")
    reports = Path(args.reports).resolve()
    reports.mkdir(parents=True, exist_ok=True)
    bake_file = reports / "bake.json"
    cmd = [
        sys.executable,
        "build.py",
        "bake",
        *[a for n in names for a in ("--target", n)],
        "--registry",
        args.registry,
        "-o",
        str(bake_file),
    ]
    if args.cache:
        cmd += ["--cache", args.cache]
    builder_name = args.builder or os.environ.get("BUILDX_BUILDER")
    if builder_name:
        cmd += ["--builder", builder_name]
    if subprocess.run(cmd, cwd=ROOT).returncode != 0:
        return 1
    builder = builders.resolve(builder_name) if builder_name else None
    targets_json = json.loads(bake_file.read_text())["target"]
    results, todo = [], []
    for name in names:
        t = targets_json[target_name(name)]
        res = Result(target=name, input_hash=t["labels"][INPUT_HASH_LABEL], hash_tag=t["tags"][1])
        results.append(res)
        if args.skip_existing:
            try:
                digest, note = registry.registry_state(res.hash_tag, moving=t["tags"][0])
            except registry.LookupFailed as e:
                digest, note = None, f"{e}; building"
            if note:
                out(f"{name}: {note}")
            if digest:
                res.status, res.digest = "skipped", digest
                res.detail = f"{res.hash_tag} already in the registry (same input hash): nothing built"
                out(f"{name}: skip, {res.hash_tag} exists in registry {args.registry} ({digest})")
                continue
        todo.append(res)
    out(f"building {len(todo)} of {len(names)} target(s): {' '.join(r.target for r in todo) or '-'}")
    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, len(todo) or 1))) as pool:
        for res in pool.map(lambda r: build_one(r, bake_file, reports, builder, args.no_cache), todo):
            out(
                f"{res.target}: {res.status} {res.digest} (build {res.build_s:.1f}s, verify {res.verify_s:.1f}s)"
                + (f": {res.detail}" if res.detail else "")
            )
    (reports / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    text = summary(results, args.registry)
    for path in filter(None, (args.summary, os.environ.get("GITHUB_STEP_SUMMARY"))):
        with open(path, "a") as f:
            f.write(text)
    return 0 if all(r.ok for r in results) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ci/pipeline.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("matrix", help="the GitHub Actions matrix (JSON), from the specs")
    r = sub.add_parser("render-all", help="render every target's Dockerfile")
    r.add_argument("--out", default="build/rendered")
    i = sub.add_parser("images", help="bake, push, verify by digest, summarise")
    i.add_argument("--family")
    i.add_argument("--target", action="append")
    i.add_argument("--registry", required=True, help="registry/namespace, e.g. ghcr.io/org")
    i.add_argument("--cache", help="registry cache repository for cache-from/cache-to")
    i.add_argument("--skip-existing", action="store_true", help="skip targets whose hash tag is in the registry")
    i.add_argument("--no-cache", action="store_true", help="build every step afresh (the scheduled run)")
    i.add_argument("--reports", default="build/reports")
    i.add_argument("--summary", help="also append the markdown summary to this file")
    i.add_argument("--builder", help="buildx builder (default: the current one, or $BUILDX_BUILDER)")
    i.add_argument("--jobs", type=int, default=4, help="targets baked at once")
    args = parse(p, argv)
    if isinstance(args, int):
        return args
    try:
        return {"matrix": cmd_matrix, "render-all": cmd_render_all, "images": cmd_images}[args.command](args)
    except ToolkitError as e:
        print(f"pipeline: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
