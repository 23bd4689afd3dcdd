"""Patch rules: hunks that could apply in the wrong place, paths outside the tree, changes a reviewer cannot see
(the list is in the package docstring)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from . import unified_diff


@dataclass
class Finding:
    path: str
    line: int
    rule: str
    message: str
    hunk: int | None = None  # set for hunk-level patch findings

    def __str__(self) -> str:
        where = "%d(%d)" % (self.hunk, self.line) if self.hunk is not None else str(self.line)
        return "%s:%s %s: %s" % (self.path, where, self.rule, self.message)


def _tree_problem(raw: str, is_git: bool, tree_root: str | None) -> str | None:
    if raw == unified_diff.DEV_NULL:
        return None
    path = unified_diff.strip_prefix(raw, is_git)
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


def lint_patch_text(text: str, name: str, tree_root: str | None = None) -> list[Finding]:
    """Findings for one patch's text; ``name`` is what the findings print as the patch path."""
    diff = unified_diff.parse(text)
    out: list[Finding] = []
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
            out.append(
                Finding(
                    name,
                    fp.line,
                    "binary",
                    "binary patch for %s: its content cannot be reviewed or context-checked" % shown,
                )
            )
        if "120000" in (fp.new_mode, fp.new_file_mode):
            out.append(
                Finding(name, fp.line, "symlink", "%s becomes a symlink, which may point outside the tree" % shown)
            )
        if fp.old_mode and fp.new_mode and not fp.hunks and not fp.binary and not fp.rename_to:
            out.append(
                Finding(
                    name, fp.line, "mode-only", "mode-only change %s -> %s for %s" % (fp.old_mode, fp.new_mode, shown)
                )
            )
        for h in fp.hunks:
            if not h.counts_agree:
                extra = ", plus %d surplus line(s)" % h.overflow if h.overflow else ""
                out.append(
                    Finding(
                        name,
                        h.line,
                        "hunk-count",
                        "%s in %s announces -%d/+%d lines but the body has "
                        "-%d/+%d%s" % (h.header, shown, h.old_count, h.new_count, h.body_old, h.body_new, extra),
                        hunk=h.index,
                    )
                )
            empties_file = h.old_start == 1 and h.new_count == 0 and h.old_count > 0
            if h.context == 0 and not fp.creates and not fp.deletes and not empties_file:
                if h.old_count == 0:
                    msg = (
                        "pure insertion %s into %s with no context: git places it by line number alone "
                        "(regenerate with context, e.g. git diff -U3)" % (h.header, shown)
                    )
                else:
                    msg = "%s in %s has no context lines to anchor it (regenerate with context, e.g. git diff -U3)" % (
                        h.header,
                        shown,
                    )
                out.append(Finding(name, h.line, "zero-context", msg, hunk=h.index))
    return out
