#!/usr/bin/env python3
"""Which image targets does a change touch? Decided by the input hash at each revision, never by path globs.

Each revision is exported with `git archive` into a temporary folder and hashed by *that revision's own* toolkit:
its specs are loaded, every target is rendered, its context files are listed, and the same input hash the build
uses is computed (Dockerfile, every context file, resolved spec, gate config). A target whose hash
differs between the two revisions is changed; a file that no image reads (README, tests/, CI config) changes no hash.

The hash printed here is the build's input hash (a host wheelhouse enters it through its recipe, which the rendered
Dockerfile names), so the decision needs no network and no download.

    python3 -m ci.changed_images --base origin/main [--head HEAD] [--repo DIR] [--json FILE]

Prints one line per target (`changed`, `same`, `added`, `removed`) and, under GitHub Actions, writes
`changed` (space-separated), `changed_json` and `any` to $GITHUB_OUTPUT. Exit 0 whatever changed; 1 when the head
revision cannot be hashed (its specs or templates are broken), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs inside an exported revision (`python -c` puts the working directory, that revision, first on sys.path).
# Uses only the toolkit functions the build itself uses, so the hash follows whatever that revision's build would
# hash.
DRIVER = r"""
import json, sys
from toolkit.render.context import plan_hash
from toolkit.plan.build_plan import host_pip_ca, make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

pip_ca = host_pip_ca()
hashes = {}
for name, variant in sorted(load_catalog().variants.items()):
    plan = make_plan(variant, pip_ca=pip_ca, revision="changed-images")
    hashes[name] = plan_hash(plan, render(plan))
print(json.dumps(hashes))
"""


class HashFailed(Exception):
    pass


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise HashFailed(f"git {' '.join(args)}: {run.stderr.strip()}")
    return run.stdout.strip()


def hash_tree(tree: Path) -> dict:
    """Input hash of every target, computed by the toolkit found in `tree`."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONSAFEPATH", None)  # the driver imports the toolkit from its working directory
    run = subprocess.run([sys.executable, "-c", DRIVER], cwd=tree, capture_output=True, text=True, env=env, timeout=600)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        raise HashFailed(last)
    return json.loads(run.stdout)


def hash_revision(repo: Path, rev: str) -> dict:
    """Export `rev` (tracked files only, as committed) and hash it."""
    commit = git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="miles-rev-") as tmp:
        archive = subprocess.Popen(["git", "-C", str(repo), "archive", "--format=tar", commit], stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout, capture_output=True, text=True)
        assert archive.stdout is not None  # stdout=PIPE
        archive.stdout.close()
        if archive.wait() != 0 or untar.returncode != 0:
            raise HashFailed(f"cannot export {rev}: {untar.stderr.strip()}")
        return hash_tree(Path(tmp))


def compare(base: dict, head: dict) -> dict:
    """Target -> status (changed, same, added, removed)."""
    status = {}
    for name in sorted(set(base) | set(head)):
        if name not in base:
            status[name] = "added"
        elif name not in head:
            status[name] = "removed"
        else:
            status[name] = "same" if base[name] == head[name] else "changed"
    return status


def changed_targets(repo: Path, base_rev: str, head_rev: str = "HEAD") -> dict:
    """{"base", "head", "hashes": {"base": ..., "head": ...}, "status", "changed", "note"} for two revisions.

    The base is the merge base of the two (what the head's branch started from), as a pull request diff is.
    A base that cannot be hashed (say, it predates the toolkit) makes every head target count as changed.
    """
    base_commit = git(repo, "merge-base", base_rev, head_rev)
    head_hashes = hash_revision(repo, head_rev)
    note = None
    try:
        base_hashes = hash_revision(repo, base_commit)
    except HashFailed as e:
        base_hashes, note = {}, f"base {base_commit[:12]} cannot be hashed ({e}): every target counts as changed"
    status = compare(base_hashes, head_hashes)
    return {
        "base": base_commit,
        "head": git(repo, "rev-parse", head_rev),
        "hashes": {"base": base_hashes, "head": head_hashes},
        "status": status,
        "changed": [n for n, s in status.items() if s in ("changed", "added")],
        "note": note,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="revision to compare against (its merge base with --head is used)")
    p.add_argument("--head", default="HEAD")
    p.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent), help="git repository (the project)")
    p.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        result = changed_targets(Path(args.repo), args.base, args.head)
    except HashFailed as e:
        print(f"changed_images: {e}", file=sys.stderr)
        return 1
    if result["note"]:
        print(f"note: {result['note']}")
    for name, status in result["status"].items():
        old = result["hashes"]["base"].get(name, "-" * 12)[:12]
        new = result["hashes"]["head"].get(name, "-" * 12)[:12]
        print(f"{status:<8} {name:<16} {old} -> {new}")
    print(
        f"{len(result['changed'])} of {len(result['status'])} target(s) changed between "
        f"{result['base'][:12]} and {result['head'][:12]}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as f:
            f.write(f"changed={' '.join(result['changed'])}\n")
            f.write(f"changed_json={json.dumps(result['changed'])}\n")
            f.write(f"any={'true' if result['changed'] else 'false'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
