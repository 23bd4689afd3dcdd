"""The overlay guard: patches that could apply to the wrong place, and build steps that could hide it.

``python -m verify.overlays [--tree-root PREFIX] PATH...`` prints one finding per line and exits 1 when there is
any (0 clean, 2 bad usage). Patch findings read ``PATCH:HUNK(line) rule: problem`` (HUNK counts hunks over the
whole patch file, line is the @@ header's line) or ``PATCH:line rule: problem`` for a file-level finding; scan
findings read ``FILE:line rule: problem``. Rules for patches:

- ``zero-context``: a hunk with no context line (above all a pure insertion ``@@ -N,0 +M,K @@``): nothing but the
  line number anchors it. File creations and deletions are exempt (their hunks cannot have context), and so is a
  hunk that empties a whole file (``@@ -1,N +0,0 @@``): without --unidiff-zero git anchors a hunk with no context at
  line 1 to the start and, with no trailing context, to the end, so it applies only to exactly those N lines.
- ``hunk-count``: the header's counts disagree with the body (a hand-edited patch).
- ``outside-tree``: an absolute path, a ``..`` component, or (with --tree-root) a path outside that prefix. Paths
  are compared without git's ``a/``/``b/`` prefixes.
- ``binary``, ``mode-only``, ``symlink``: changes a reviewer does not see in the text of the patch.
- ``not-a-diff``, ``malformed``: nothing to apply, or a hunk header that cannot be read.

Build-step rules are in verify.stepscan. Directories are walked: *.patch and *.diff are patches; Dockerfile*,
*.j2, *.sh, *.bash, *.yml, *.yaml, Makefile and *.mk are scanned. A file named explicitly is read as a patch if it
ends in .patch/.diff, else scanned by its name (unknown names as shell).
"""
from __future__ import annotations

import argparse
import os
import posixpath
import sys
from dataclasses import dataclass
from typing import Iterable, List, Optional

from . import stepscan, unidiff

PATCH_SUFFIXES = (".patch", ".diff")
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".tox", ".venv", "venv", ".mypy_cache",
              ".pytest_cache"}


@dataclass
class Finding:
    path: str
    line: int
    rule: str
    message: str
    hunk: Optional[int] = None  # set for hunk-level patch findings

    def __str__(self) -> str:
        where = "%d(%d)" % (self.hunk, self.line) if self.hunk is not None else str(self.line)
        return "%s:%s %s: %s" % (self.path, where, self.rule, self.message)


def _tree_problem(raw: str, is_git: bool, tree_root: Optional[str]) -> Optional[str]:
    if raw == unidiff.DEV_NULL:
        return None
    path = unidiff.strip_prefix(raw, is_git)
    if raw.startswith("/") or path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "absolute path %s" % raw
    if ".." in path.replace("\\", "/").split("/"):
        return "path %s leaves the tree through '..'" % raw
    if tree_root:
        root = posixpath.normpath(tree_root.strip("/")) if tree_root.strip("/") else ""
        norm = posixpath.normpath(path)
        if root and root != "." and not (norm == root or norm.startswith(root + "/")):
            return "path %s is outside the target tree %s/" % (path, root)
    return None


def lint_patch_text(text: str, name: str, tree_root: Optional[str] = None) -> List[Finding]:
    """Findings for one patch's text; ``name`` is what the findings print as the patch path."""
    diff = unidiff.parse(text)
    out: List[Finding] = []
    for bad in diff.malformed:
        out.append(Finding(name, bad.line, "malformed", bad.problem))
    if not diff.files and not diff.malformed:
        out.append(Finding(name, 1, "not-a-diff", "no file header (diff --git or ---/+++) found"))
    for fp in diff.files:
        shown = fp.display_path
        seen = set()
        for raw in (fp.old_path, fp.new_path, fp.rename_from, fp.rename_to):
            if raw is None:
                continue
            is_git = fp.is_git and raw in (fp.old_path, fp.new_path)
            problem = _tree_problem(raw, is_git, tree_root)
            if problem and problem not in seen:
                seen.add(problem)
                out.append(Finding(name, fp.line, "outside-tree", problem))
        if fp.binary:
            out.append(Finding(name, fp.line, "binary", "binary patch for %s: its content cannot be reviewed or "
                               "context-checked" % shown))
        if "120000" in (fp.new_mode, fp.new_file_mode):
            out.append(Finding(name, fp.line, "symlink", "%s becomes a symlink, which may point outside the tree"
                               % shown))
        if fp.old_mode and fp.new_mode and not fp.hunks and not fp.binary and not fp.rename_to:
            out.append(Finding(name, fp.line, "mode-only", "mode-only change %s -> %s for %s"
                               % (fp.old_mode, fp.new_mode, shown)))
        for h in fp.hunks:
            if not h.counts_agree:
                extra = ", plus %d surplus line(s)" % h.overflow if h.overflow else ""
                out.append(Finding(name, h.line, "hunk-count", "%s in %s announces -%d/+%d lines but the body has "
                                   "-%d/+%d%s" % (h.header, shown, h.old_count, h.new_count, h.body_old,
                                                  h.body_new, extra), hunk=h.index))
            empties_file = h.old_start == 1 and h.new_count == 0 and h.old_count > 0
            if h.context == 0 and not fp.creates and not fp.deletes and not empties_file:
                if h.old_count == 0:
                    msg = ("pure insertion %s into %s with no context: git places it by line number alone "
                           "(regenerate with context, e.g. git diff -U3)" % (h.header, shown))
                else:
                    msg = ("%s in %s has no context lines to anchor it (regenerate with context, e.g. git diff -U3)"
                           % (h.header, shown))
                out.append(Finding(name, h.line, "zero-context", msg, hunk=h.index))
    return out


def lint_step_text(text: str, name: str, kind: Optional[str] = None) -> List[Finding]:
    """Findings for a template/Dockerfile/script/Makefile/YAML text (see verify.stepscan for the rules)."""
    kind = kind or stepscan.file_kind(name) or "shell"
    templated = name.endswith(".j2")
    return [Finding(name, f.line, f.rule, f.message) for f in stepscan.scan_text(text, kind, templated)]


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _walk(root: str) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for f in sorted(filenames):
            path = os.path.join(dirpath, f)
            if f.endswith(PATCH_SUFFIXES) or stepscan.file_kind(path):
                yield path


def lint_file(path: str, tree_root: Optional[str] = None) -> List[Finding]:
    if path.endswith(PATCH_SUFFIXES):
        return lint_patch_text(_read(path), path, tree_root)
    return lint_step_text(_read(path), path)


def lint_paths(paths: Iterable[str], tree_root: Optional[str] = None) -> List[Finding]:
    """Lint files and directories (walked). Raises FileNotFoundError for a path that does not exist."""
    out: List[Finding] = []
    for path in paths:
        if os.path.isdir(path):
            for f in _walk(path):
                out.extend(lint_file(f, tree_root))
        elif os.path.isfile(path):
            out.extend(lint_file(path, tree_root))
        else:
            raise FileNotFoundError("no such file or directory: %s" % path)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verify.overlays",
                                     description="Overlay guard: unsafe patches and unsafe patch steps.")
    parser.add_argument("--tree-root", metavar="PREFIX",
                        help="every path a patch touches must lie under this prefix (after dropping a/ and b/)")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="patch files, build files or directories")
    args = parser.parse_args(argv)
    try:
        findings = lint_paths(args.paths, args.tree_root)
    except OSError as exc:
        sys.stderr.write("verify.overlays: error: %s\n" % exc)
        return 2
    for f in findings:
        print(f)
    sys.stderr.write("verify.overlays: %d finding(s)\n" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
