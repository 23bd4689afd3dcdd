"""Read a function's signature from its source with ``ast``, without importing the module.

Importing sglang's kernel module pulls ``sglang.srt.utils`` and heavy dependencies; the build gate still has to
notice when the kernel grew required parameters. The file is found with verify.locate (no package code runs),
parsed, and the ``def`` turned into an ``inspect.Signature`` that ``bind`` can test exactly like a live one.
"""

from __future__ import annotations

import ast
import inspect
from typing import List, Optional, Tuple, Union

from . import locate

_Def = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_MAX_REEXPORT_HOPS = 8


class SourceSignatureError(LookupError):
    """The signature could not be read from source; the message says why, naming the file where known."""


class _SourceDefault:
    """Stands in for a default value that exists only as source text (so str(signature) still reads well)."""

    def __init__(self, node: ast.AST):
        self.text = ast.unparse(node)

    def __repr__(self) -> str:
        return self.text


def _top_level_bindings(body: List[ast.stmt]) -> List[ast.stmt]:
    """Statements that bind module-level names, including inside if/try blocks (last one wins at runtime)."""
    out: List[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ImportFrom, ast.Assign)):
            out.append(stmt)
        elif isinstance(stmt, ast.If):
            out.extend(_top_level_bindings(stmt.body) + _top_level_bindings(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            blocks = stmt.body + [s for h in stmt.handlers for s in h.body] + stmt.orelse + stmt.finalbody
            out.extend(_top_level_bindings(blocks))
    return out


def _binding(body: List[ast.stmt], name: str) -> Optional[ast.stmt]:
    found: Optional[ast.stmt] = None
    for stmt in _top_level_bindings(body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            found = stmt
        elif isinstance(stmt, ast.ImportFrom) and any((a.asname or a.name) == name for a in stmt.names):
            found = stmt
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt
    return found


def _decorator_names(fn: _Def) -> List[str]:
    names = []
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.append(ast.unparse(target))
    return names


def signature_of_def(fn: _Def, drop_first: bool = False) -> inspect.Signature:
    """Turn a parsed ``def`` into an inspect.Signature (annotations are left out; defaults keep their source text)."""
    P = inspect.Parameter
    a = fn.args
    positional: List[Tuple[ast.arg, inspect._ParameterKind]] = [
        (arg, P.POSITIONAL_ONLY) for arg in getattr(a, "posonlyargs", [])
    ]
    positional += [(arg, P.POSITIONAL_OR_KEYWORD) for arg in a.args]
    first_default = len(positional) - len(a.defaults)
    params = []
    for i, (arg, kind) in enumerate(positional):
        default = _SourceDefault(a.defaults[i - first_default]) if i >= first_default else P.empty
        params.append(P(arg.arg, kind, default=default))
    if a.vararg is not None:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, default_node in zip(a.kwonlyargs, a.kw_defaults):
        default = _SourceDefault(default_node) if default_node is not None else P.empty
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=default))
    if a.kwarg is not None:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    if drop_first and params and params[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
        params = params[1:]
    return inspect.Signature(params)


def _resolve_relative(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def _parse(module: str) -> Tuple[ast.Module, str, bool]:
    found = locate.find_module(module)
    if found is None:
        raise SourceSignatureError("module %s not found on sys.path" % module)
    if found.file is None:
        raise SourceSignatureError("%s is a namespace package at %s: no source to read" % (module, found.where))
    if not found.file.endswith(locate.SOURCE_SUFFIXES):
        raise SourceSignatureError("%s is a compiled module (%s): check it with import mode" % (module, found.file))
    try:
        with open(found.file, "rb") as fh:
            tree = ast.parse(fh.read(), filename=found.file)
    except SyntaxError as exc:
        raise SourceSignatureError("%s:%s: %s: %s" % (exc.filename, exc.lineno, type(exc).__name__, exc.msg)) from None
    except (OSError, ValueError) as exc:
        raise SourceSignatureError("%s: cannot read: %s" % (found.file, exc)) from None
    return tree, found.file, found.is_package


def literal_from_source(module: str, name: str) -> Tuple[object, str, int]:
    """The value of a module-level ``name = <literal>`` read from source (``ast.literal_eval``), never importing.

    Returns (value, file, line). This is how a gate reads a data table that another package keeps (for instance the
    bridge's table of where sglang keeps its kernel) without running that package's imports.
    """
    tree, path, _ = _parse(module)
    node = _binding(tree.body, name)
    if not isinstance(node, ast.Assign):
        raise SourceSignatureError("%s has no top-level assignment of %r (%s)" % (module, name, path))
    try:
        return ast.literal_eval(node.value), path, node.lineno
    except (ValueError, TypeError, SyntaxError, RecursionError) as exc:
        raise SourceSignatureError("%s:%d: %s is not a literal: %s" % (path, node.lineno, name, exc)) from None


def signature_from_source(module: str, attr: str) -> Tuple[inspect.Signature, str, int, List[str]]:
    """Signature of ``module:attr`` (attr may be ``Class.method``) from source.

    Returns (signature, file, line, decorators). Follows ``from x import name`` re-exports. A class gives its
    ``__init__`` without ``self``; a method is seen as called on an instance (``self``/``cls`` dropped).
    """
    first, _, rest = attr.partition(".")
    for _ in range(_MAX_REEXPORT_HOPS):
        tree, path, is_package = _parse(module)
        node = _binding(tree.body, first)
        if node is None:
            raise SourceSignatureError("%s has no top-level definition of %r (%s)" % (module, first, path))
        if isinstance(node, ast.ImportFrom):
            alias = next(a for a in node.names if (a.asname or a.name) == first)
            module, first = _resolve_relative(module, is_package, node), alias.name
            continue
        if isinstance(node, ast.Assign):
            if isinstance(node.value, ast.Name):
                first = node.value.id
                continue
            raise SourceSignatureError(
                "%s:%d: %s is assigned from an expression, not a def: use import mode" % (path, node.lineno, first)
            )
        return _walk_attrs(node, rest, path)
    raise SourceSignatureError("%s:%s: too many re-exports to follow" % (module, attr))


def _walk_attrs(node: ast.stmt, rest: str, path: str) -> Tuple[inspect.Signature, str, int, List[str]]:
    in_class = False
    for part in [p for p in rest.split(".") if p]:
        if not isinstance(node, ast.ClassDef):
            raise SourceSignatureError(
                "%s:%d: %s is not a class, cannot look up %r" % (path, node.lineno, getattr(node, "name", "?"), part)
            )
        member = None
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == part:
                member = stmt
        if member is None:
            raise SourceSignatureError("%s:%d: class %s defines no %r" % (path, node.lineno, node.name, part))
        node, in_class = member, True
    if isinstance(node, ast.ClassDef):
        init = None
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                init = stmt
        if init is None:
            raise SourceSignatureError(
                "%s:%d: class %s has no __init__ in its own source: use import mode" % (path, node.lineno, node.name)
            )
        return signature_of_def(init, drop_first=True), path, init.lineno, []
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    decorators = _decorator_names(node)
    drop = in_class and "staticmethod" not in decorators
    return signature_of_def(node, drop_first=drop), path, node.lineno, decorators
