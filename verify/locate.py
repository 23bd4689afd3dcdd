"""Find modules and packages on sys.path WITHOUT executing any package code.

``importlib.util.find_spec("a.b")`` imports ``a`` first, which runs ``a/__init__.py`` (for sglang that pulls torch
and friends). So only the top-level name goes through ``find_spec``; submodules are found by walking directories the
way the path-based finder does.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
from typing import List, Optional

SOURCE_SUFFIXES = tuple(importlib.machinery.SOURCE_SUFFIXES)
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class Located:
    """Where a (sub)module lives: ``file`` for a module or a package's __init__, ``dirs`` for a package."""

    def __init__(self, name: str, file: Optional[str], dirs: List[str]):
        self.name = name
        self.file = file
        self.dirs = dirs

    @property
    def is_package(self) -> bool:
        return bool(self.dirs)

    @property
    def where(self) -> str:
        """The path a human wants to see: the package directory or the module file."""
        if self.dirs:
            return self.dirs[0]
        return self.file or "?"


def find_top_level(name: str) -> Optional[Located]:
    """Locate a top-level module with find_spec (which does not execute code for a top-level name)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    dirs = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec.has_location else None
    return Located(name, origin, dirs)


def _find_in_dirs(name: str, short: str, dirs: List[str]) -> Optional[Located]:
    namespace_dirs = []
    for d in dirs:
        pkg = os.path.join(d, short)
        if os.path.isdir(pkg):
            for suffix in SOURCE_SUFFIXES:
                init = os.path.join(pkg, "__init__" + suffix)
                if os.path.isfile(init):
                    return Located(name, init, [pkg])
        for suffix in SOURCE_SUFFIXES + EXTENSION_SUFFIXES:
            f = os.path.join(d, short + suffix)
            if os.path.isfile(f):
                return Located(name, f, [])
        if os.path.isdir(pkg):
            namespace_dirs.append(pkg)
    if namespace_dirs:
        return Located(name, None, namespace_dirs)
    return None


def find_module(dotted: str) -> Optional[Located]:
    """Locate ``a.b.c`` by find_spec("a") and then a directory walk; no package code runs."""
    parts = dotted.split(".")
    found = find_top_level(parts[0])
    for depth, short in enumerate(parts[1:], start=2):
        if found is None or not found.dirs:
            return None
        found = _find_in_dirs(".".join(parts[:depth]), short, found.dirs)
    return found


def site_dirs() -> List[str]:
    """Every directory that counts as "site-packages" for this interpreter (venv-aware)."""
    dirs = []
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key):
            dirs.append(paths[key])
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        pass
    out = []
    for d in dirs:
        real = os.path.realpath(d)
        if real not in out:
            out.append(real)
    return out


def is_under(path: str, root: str) -> bool:
    """True when ``path`` lies inside ``root`` after resolving symlinks."""
    path, root = os.path.realpath(path), os.path.realpath(root)
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def is_namespace(found: Located) -> bool:
    """A namespace package: folders without an ``__init__``, whose submodules may each come from another one."""
    return found.file is None and bool(found.dirs)


def copies_on_path(name: str) -> List[str]:
    """All places on sys.path, in order, that provide ``name`` (``a`` or ``a.b.c``) as a module or a regular
    package (a shadowing copy shows up first); a dotted name is walked through each entry's own folders."""
    out = []
    parts = name.split(".")
    for entry in sys.path:
        base = entry or os.getcwd()
        if not os.path.isdir(base):
            continue
        hit = _find_in_dirs(parts[0], parts[0], [base])
        for depth, part in enumerate(parts[1:], start=2):
            if hit is None or not hit.dirs:
                hit = None
                break
            hit = _find_in_dirs(".".join(parts[:depth]), part, hit.dirs[:1])
        if hit is not None and not is_namespace(hit):
            where = os.path.realpath(hit.where)
            if where not in out:
                out.append(where)
    return out


def regular_subpackages(found: Located) -> List[str]:
    """``name (folder)`` for each regular subpackage of a namespace package, the way its portions provide them."""
    out = []
    for d in found.dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for child in names:
            sub = _find_in_dirs(found.name + "." + child, child, [d])
            if sub is not None and sub.is_package and not is_namespace(sub):
                out.append("%s (%s)" % (sub.name, os.path.realpath(sub.where)))
    return out
