#!/usr/bin/env python3
"""Pull request body directives -> a one-build `--ref` override, upstream miles' convention parsed as data.

A line `ci-sglang-pr: <ref>` or `ci-megatron-pr: <ref>` in the body of a pull request asks CI to build with that
revision of sglang (component `sglang_miles`) or Megatron-LM (`megatron_lm`) instead of the locked one. `<ref>` is
a 40-hex commit, `#N` (the head of upstream pull request N, `refs/pull/N/head`) or a branch or tag name; anything
else (a space, a shell character, a name git would refuse) is refused. A name is resolved to its commit with
`git ls-remote` against the component's repository, so the build, its input hash and its label name an exact
commit. The body is read from an environment variable, never from the command line, and nothing of it reaches a
shell: the output is one argument per line for `build.py bake` (`--target T` for every target with the component,
then `--ref NAME=COMMIT`).

    PR_BODY=... python3 -m ci.pr_refs [--body-env PR_BODY] [--args FILE]

Writes `any=true|false` to $GITHUB_OUTPUT under GitHub Actions. Exit 0 (also when the body names nothing), 2 on a
refused value or a ref the repository does not have, 3 when the repository cannot be reached.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from toolkit.errors import ToolkitError, UsageError, short
from toolkit.lock import remote
from toolkit.plan.sources import git_components
from toolkit.spec.catalog import load_catalog
from toolkit.spec.refnames import ref_name_problem
from toolkit.spec.values import COMMIT_RE

DIRECTIVES = {"ci-sglang-pr": "sglang_miles", "ci-megatron-pr": "megatron_lm"}
LINE_RE = re.compile(r"(ci-[a-z]+-pr):[ \t]*(.*?)[ \t]*")
PULL_RE = re.compile(r"#([1-9][0-9]{0,9})")


def parse_body(body: str) -> dict:
    """{component: ref} from the directive lines (one per directive); a bad value is a UsageError."""
    out: dict = {}
    for line in body.replace("\r\n", "\n").split("\n"):
        m = LINE_RE.fullmatch(line)
        if not m or m.group(1) not in DIRECTIVES:
            continue
        directive, value = m.groups()
        component = DIRECTIVES[directive]
        pull = PULL_RE.fullmatch(value)
        if pull:
            ref = f"refs/pull/{pull.group(1)}/head"
        elif COMMIT_RE.fullmatch(value):
            ref = value
        else:
            problem = ref_name_problem(value)
            if problem:
                raise UsageError(f"pull request body, {directive}: {problem} (a 40-hex commit, #N or a ref name)")
            ref = value
        if component in out and out[component] != ref:
            raise UsageError(f"pull request body: {directive} given twice ({short(value)})")
        out[component] = ref
    return out


def resolve(url: str, ref: str) -> str:
    """A commit stays itself; a name is what `git ls-remote` says it is now (a branch first, then a tag)."""
    if COMMIT_RE.fullmatch(ref):
        return ref
    if ref.startswith("refs/"):
        names = [ref]
    else:
        names = [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"]  # a branch, else a tag's commit
    refs = remote.ls_remote(url, names)
    for name in names:
        if name in refs:
            return refs[name]
    raise remote.RemoteNotFound(f"git ls-remote {url}: no ref {ref!r} there")


def override_args(wanted: dict, catalog) -> tuple:
    """(bake arguments, report lines) for the wanted {component: ref}."""
    targets: list = []
    urls: dict = {}
    for name, variant in sorted(catalog.variants.items()):
        comps = git_components(variant)
        if any(c in comps for c in wanted):
            targets.append(name)
            for c in wanted:
                if c in comps:
                    urls.setdefault(c, set()).add(comps[c]["git"])
    args, report = [f"--target={t}" for t in targets], []
    for component, ref in sorted(wanted.items()):
        if component not in urls:
            raise UsageError(f"pull request body: no target has the git component {component}")
        if len(urls[component]) > 1:
            raise UsageError(
                f"{component}: the targets name different repositories ({', '.join(sorted(urls[component]))})"
            )
        url = urls[component].pop()
        commit = resolve(url, ref)
        args.append(f"--ref={component}={commit}")
        report.append(f"{component}: {ref} -> {commit} ({url})")
    return args, report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ci.pr_refs", description=__doc__.splitlines()[0])
    ap.add_argument("--body-env", default="PR_BODY", help="the environment variable holding the body")
    ap.add_argument("--args", metavar="FILE", help="write the bake arguments here, one per line")
    opts = ap.parse_args(argv)
    try:
        wanted = parse_body(os.environ.get(opts.body_env, ""))
        args, report = override_args(wanted, load_catalog()) if wanted else ([], [])
    except ToolkitError as e:
        print(f"ci.pr_refs: {e}", file=sys.stderr)
        return e.exit_code
    for line in report or ["no ci-sglang-pr / ci-megatron-pr line: the locked commits build"]:
        print(line)
    if opts.args:
        Path(opts.args).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.args).write_text("".join(a + "\n" for a in args))
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as f:
            f.write(f"any={'true' if args else 'false'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
