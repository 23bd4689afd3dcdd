"""Which rules a file gets: patches (*.patch, *.diff) get the patch rules, build files the build-step rules;
directories are walked."""

from __future__ import annotations

import os
import stat
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


class NotAFile(OSError):
    """A path to lint that is neither a regular file nor a folder (a FIFO would block the read, a device never
    end); the message is one line naming it."""


def _read(path: str) -> str:
    """A regular file's text. Opened without blocking and checked on the open descriptor, so a FIFO or device
    (given, found in a folder, or swapped in since the walk) is refused, never read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile("not a regular file: %s" % path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, encoding="utf-8", errors="replace") as fh:
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
    """Lint files and directories (walked). Raises FileNotFoundError for a path that does not exist, NotAFile for
    one that is neither a regular file nor a folder (a FIFO, a device, a socket, a broken link)."""
    out: list[Finding] = []
    for path in paths:
        if os.path.isdir(path):
            for f in _walk(path):
                out.extend(lint_file(f, tree_root))
        elif os.path.isfile(path):
            out.extend(lint_file(path, tree_root))
        elif os.path.lexists(path):
            raise NotAFile("not a regular file or folder: %s" % path)
        else:
            raise FileNotFoundError("no such file or directory: %s" % path)
    return out
