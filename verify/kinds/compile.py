"""compile: every .py of a first-party package or directory byte-compiles, so a syntax error in a module nobody
imports at start-up still fails the build."""

from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Tuple

from .. import locate
from ..result import CheckResult
from .base import Gate, short, str_list


def _compile_roots(target: str) -> Tuple[List[str], Optional[str]]:
    """Directories or files to compile for ``target``, or an error. Never imports anything."""
    looks_like_path = os.sep in target or target.startswith(".") or (os.altsep and os.altsep in target)
    if not looks_like_path and re.match(r"^[A-Za-z_][\w.]*$", target):
        found = locate.find_module(target)
        if found is not None:
            if found.dirs:
                return list(found.dirs), None
            if found.file and found.file.endswith(locate.SOURCE_SUFFIXES):
                return [found.file], None
            return [], "%s is a compiled module (%s): nothing to byte-compile" % (target, found.file)
    if os.path.isdir(target):
        return [os.path.abspath(target)], None
    if looks_like_path:
        return [], "no such directory: %s" % target
    return [], "package %s not found on sys.path (located without importing)" % target


def _py_files(root: str) -> List[str]:
    if os.path.isfile(root):
        return [root]
    out: List[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return out


def compile_file(path: str) -> Optional[str]:
    """Compile one file in memory (no .pyc is written); return ``file:line: Class: msg`` on failure."""
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError included
        return "%s:%s: %s: %s" % (path, exc.lineno or 0, type(exc).__name__, exc.msg)
    except ValueError as exc:  # null bytes on Python < 3.12
        return "%s:0: %s: %s" % (path, type(exc).__name__, exc)
    except OSError as exc:
        return "%s:0: %s: %s" % (path, type(exc).__name__, exc.strerror or exc)
    return None


class Compile(Gate):
    key = "compile"
    kind = "compile"
    order = 20
    passes_when = (
        "every `.py` of the package (located with `find_spec` of the top-level name + a directory walk) or "
        "directory compiles; reports the count"
    )
    never_does = "execute package code, write `.pyc`"

    def parse(self, value: Any, where: str) -> List[str]:
        return str_list(value, where, self.key)

    def dump(self, items: List[str]) -> Any:
        return list(items)

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--compile",
            action="append",
            default=[],
            metavar="PACKAGE_OR_DIR",
            help="byte-compile every .py of a package (located without importing) or directory, in memory",
        )

    def from_flags(self, args: Any) -> List[str]:
        return list(args.compile)

    def check(self, target: str) -> CheckResult:
        roots, error = _compile_roots(target)
        if error:
            return CheckResult("compile", target, False, error)
        files = [f for root in roots for f in _py_files(root)]
        errors = [e for e in (compile_file(f) for f in files) if e]
        where = ", ".join(roots)
        if not files:
            return CheckResult("compile", target, False, "no .py files under %s" % where)
        if errors:
            more = " (and %d more)" % (len(errors) - 1) if len(errors) > 1 else ""
            detail = "%s%s; %d of %d files failed" % (errors[0], more, len(errors), len(files))
            return CheckResult("compile", target, False, short(detail, 500), log="\n".join(errors))
        return CheckResult("compile", target, True, "%d files compiled in %s" % (len(files), where))
