"""Which rules a file gets: patches (*.patch, *.diff) get the patch rules, build files the build-step rules;
directories are walked."""

from __future__ import annotations

import os
from collections.abc import Iterable

from . import build_steps
from .patch_rules import Finding, lint_patch_text

PATCH_SUFFIXES = (".patch", ".diff")
_SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".tox",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
}


def lint_step_text(text: str, name: str, kind: str | None = None) -> list[Finding]:
    """Findings for a template/Dockerfile/script/Makefile/YAML text (rules: overlay_guard.build_steps)."""
    kind = kind or build_steps.file_kind(name) or "shell"
    templated = name.endswith(".j2")
    return [Finding(name, f.line, f.rule, f.message) for f in build_steps.scan_text(text, kind, templated)]


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _walk(root: str) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for f in sorted(filenames):
            path = os.path.join(dirpath, f)
            if f.endswith(PATCH_SUFFIXES) or build_steps.file_kind(path):
                yield path


def lint_file(path: str, tree_root: str | None = None) -> list[Finding]:
    if path.endswith(PATCH_SUFFIXES):
        return lint_patch_text(_read(path), path, tree_root)
    return lint_step_text(_read(path), path)


def lint_paths(paths: Iterable[str], tree_root: str | None = None) -> list[Finding]:
    """Lint files and directories (walked). Raises FileNotFoundError for a path that does not exist."""
    out: list[Finding] = []
    for path in paths:
        if os.path.isdir(path):
            for f in _walk(path):
                out.extend(lint_file(f, tree_root))
        elif os.path.isfile(path):
            out.extend(lint_file(path, tree_root))
        else:
            raise FileNotFoundError("no such file or directory: %s" % path)
    return out
