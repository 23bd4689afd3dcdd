#!/usr/bin/env python3
"""The third-party modules miles imports on its start paths, read from its source without importing it.

The GPU images' import gates should fail when a module that a miles run needs at start-up is missing or broken.
Importing miles' backend packages proves little (their `__init__` guards the heavy imports), so this script reads a
miles tree (a directory, or a `git archive` tarball whose members sit under one top folder) with `ast` and writes
`images/miles-start-imports.json`: per start path, every third-party module reached and the miles modules that
import it, their union, and a reduced gate list. Rerun it on every miles bump (the test
`tests/test_miles_start_imports.py` fails until the committed file matches the pinned commit's snapshot):

    python3 -m ci.miles_start_imports --source ../shared/upstream/miles-<name>.tar.gz -o images/miles-start-imports.json
    python3 -m ci.miles_start_imports --source PATH --check images/miles-start-imports.json     # exit 1 on a diff

Start paths (each found in the tree by what it defines; one that finds nothing stops the script, exit 2, so an
upstream reshuffle is a maintainer's edit of START_PATHS, never a silently shorter list):
  driver          `train.py` and `train_async.py` at the tree's root; without them, the miles modules defining the
                  launcher functions those scripts call (`parse_args`, `create_placement_groups`,
                  `create_rollout_manager`, `create_training_models`)
  fsdp_actor      the `actor` module under `miles/backends/fsdp_utils/`
  megatron_actor  the `actor` module under `miles/backends/megatron_utils/`
  rollout         the module defining `RolloutManager`, and the rollout functions that the arguments select by
                  dotted path (the `miles.rollout.*` strings of `resolve_rollout_function_paths`)
  router          the module defining `start_router` (it launches sglang_router or miles' own router)

Rules, applied to every miles module reached from a start path:
  - Every import statement counts, at module level or inside a function or method body (a function-level import
    is one the run needs when that function runs); so does `importlib.import_module(...)`/`__import__(...)` with
    a string literal. A module is reached with its parent packages (their `__init__` runs first), and
    `from pkg import name` reaches `pkg.name` when the tree has that module.
  - Skipped: imports inside a `try` statement with a handler for ImportError or ModuleNotFoundError (its body,
    handlers and `else`: optional by design; listed apart as `optional` unless the path also imports them
    unguarded), inside `if TYPE_CHECKING:`, and inside `if __name__ == "__main__":` of a module that is not a
    start script. A handler for `Exception` or a bare
    `except` does not make an import optional: it hides a broken import, it does not mean the run works without.
  - Not followed: imports by a computed name (`load_function(args.x)`): the rollout start path names the defaults.
  - Third-party module names are kept as imported: `import a.b.c` gives `a.b.c`, `from a.b import c` gives `a.b`
    (`c` may be a function). The standard library (`sys.stdlib_module_names`) and miles' own packages are left out.
  - `eager`: the module is imported at module level (or in a module-level function that the module's own
    top-level code calls by name) by a miles module reached the same way, so importing the start path's modules
    already fails without it; the others are needed once the function that imports them runs.
  - `gate`: the union's names less every name that is a dotted prefix of another (importing `a.b.c` imports `a.b`
    and `a`); importing each name of `gate` imports every module of the union. `gate_eager`: the same of the
    eager modules alone (what importing the start paths' modules needs, on every platform the run starts on).
  - `unresolved`: miles-internal imports that name no module of the tree (a broken import upstream).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tarfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

OWN = ("miles", "miles_plugins")
SCRIPTS = ("train.py", "train_async.py")
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}
LAUNCHER = ("parse_args", "create_placement_groups", "create_rollout_manager", "create_training_models")


class UsageError(Exception):
    """Bad input: one line for the user, exit 2."""


@dataclass(frozen=True)
class Edge:
    """One import of a module: `target` as imported, `names` of a from-import, lazy (in a function body),
    optional (under an ImportError guard), line."""

    target: str
    names: tuple[str, ...]
    lazy: bool
    optional: bool
    line: int


@dataclass
class Module:
    name: str
    path: str
    tree: ast.Module | None  # None: the file does not parse
    error: str = ""
    is_package: bool = False
    is_script: bool = False
    edges: list[Edge] = field(default_factory=list)


def read_source(source: Path) -> tuple[dict[str, str], str]:
    """The tree's Python files ({path relative to the tree's root: text}) and its commit: a directory (commit from
    git) or a tarball (members under one top folder; commit from its pax header, as `git archive` writes it)."""
    if source.is_dir():
        files = {}
        for path in sorted(source.rglob("*.py")):
            rel = path.relative_to(source).as_posix()
            if _wanted(rel):
                files[rel] = path.read_text(encoding="utf-8", errors="replace")
        run = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
        if run.returncode != 0:
            raise UsageError(f"{source}: not a git checkout, so its miles commit is unknown")
        return files, run.stdout.strip()
    if not source.is_file():
        raise UsageError(f"{source}: no such file or directory")
    try:
        tar = tarfile.open(source)
    except (tarfile.TarError, OSError) as e:
        raise UsageError(f"{source}: not a directory or a readable tarball ({e})") from None
    with tar:
        commit = tar.pax_headers.get("comment", "")
        if len(commit) != 40:
            raise UsageError(f"{source}: its pax header records no commit (make it with `git archive`)")
        members = [m for m in tar.getmembers() if m.isfile()]
        tops = {PurePosixPath(m.name).parts[0] for m in members}
        strip = len(tops) == 1 and all(len(PurePosixPath(m.name).parts) > 1 for m in members)
        files = {}
        for m in members:
            parts = PurePosixPath(m.name).parts[1 if strip else 0 :]
            rel = "/".join(parts)
            if rel.endswith(".py") and _wanted(rel):
                data = tar.extractfile(m)
                assert data is not None
                files[rel] = io.TextIOWrapper(data, encoding="utf-8", errors="replace").read()
    return files, commit


def _wanted(rel: str) -> bool:
    parts = rel.split("/")
    return (len(parts) == 1 and rel in SCRIPTS) or (len(parts) > 1 and parts[0] in OWN)


def index(files: dict[str, str]) -> dict[str, Module]:
    """Every file as a module, by dotted name, its imports extracted."""
    modules = {}
    for rel, text in sorted(files.items()):
        parts = rel[: -len(".py")].split("/")
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        try:
            tree: ast.Module | None = ast.parse(text, filename=rel)
            error = ""
        except SyntaxError as e:
            tree, error = None, f"{rel}:{e.lineno}: {e.msg}"
        modules[name] = Module(name, rel, tree, error, is_package, is_script=len(parts) == 1)
    for mod in modules.values():
        if mod.tree is not None:
            mod.edges = _edges(mod)
    return modules


def _edges(mod: Module) -> list[Edge]:
    package = mod.name if mod.is_package else mod.name.rpartition(".")[0]
    edges: list[Edge] = []

    def walk(node: ast.AST, lazy: bool, optional: bool) -> None:
        if isinstance(node, ast.Import):
            edges.extend(Edge(a.name, (), lazy, optional, node.lineno) for a in node.names)
            return
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base is not None:
                edges.append(Edge(base, tuple(a.name for a in node.names), lazy, optional, node.lineno))
            return
        if isinstance(node, ast.Call) and _literal_import(node):
            edges.append(Edge(_literal_import(node), (), lazy, optional, node.lineno))
        if isinstance(node, ast.Lambda) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (lazy or node.name not in run_at_import)
        ):
            lazy = True
        if isinstance(node, (ast.Try, ast.TryStar)) and any(_catches_import_error(h) for h in node.handlers):
            for child in [*node.body, *node.handlers, *node.orelse]:
                walk(child, lazy, True)
            for child in node.finalbody:
                walk(child, lazy, optional)
            return
        if isinstance(node, ast.If) and (_is_type_checking(node.test) or (_is_main(node.test) and not mod.is_script)):
            for child in node.orelse:
                walk(child, lazy, optional)
            return
        for child in ast.iter_child_nodes(node):
            walk(child, lazy, optional)

    assert mod.tree is not None
    run_at_import = _called_at_import(mod.tree)
    walk(mod.tree, False, False)
    return edges


def _called_at_import(tree: ast.Module) -> set[str]:
    """The names that the module's own top-level code calls (outside every function body): a module-level
    function of that name runs when the module is imported."""
    called: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        stack.extend(ast.iter_child_nodes(node))
    return called


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 >= len(parts):
        return None  # above the top package (or in a script): Python refuses it too
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])]) or None


def _literal_import(node: ast.Call) -> str:
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    if named and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value if not node.args[0].value.startswith(".") else ""
    return ""


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(_name(k) in IMPORT_ERRORS for k in kinds if k is not None)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_type_checking(test: ast.expr) -> bool:
    return _name(test) == "TYPE_CHECKING"


def _is_main(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(_name(s) == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _is_own(name: str) -> bool:
    return name.split(".")[0] in OWN


def _is_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


# --- start paths -----------------------------------------------------------------------------------------------


def _defining(modules: dict[str, Module], names: tuple[str, ...]) -> dict[str, list[str]]:
    """For each name, the miles modules that define it at top level (function or class)."""
    found: dict[str, list[str]] = {n: [] for n in names}
    for mod in modules.values():
        if mod.tree is None or mod.is_script:
            continue
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in found:
                found[node.name].append(mod.name)
    return found


def _need(found: dict[str, list[str]], what: str) -> list[str]:
    missing = [n for n, where in found.items() if not where]
    if missing:
        raise UsageError(f"start path {what}: no miles module defines {', '.join(missing)} (update START_PATHS)")
    return sorted({m for where in found.values() for m in where})


def _driver(modules: dict[str, Module]) -> list[str]:
    scripts = [s[: -len(".py")] for s in SCRIPTS if s[: -len(".py")] in modules]
    return scripts or _need(_defining(modules, LAUNCHER), "driver")


def _actor(backend: str):
    def find(modules: dict[str, Module]) -> list[str]:
        prefix = f"miles.backends.{backend}."
        found = sorted(m for m in modules if m.startswith(prefix) and m.rpartition(".")[2] == "actor")
        if not found:
            raise UsageError(f"start path {backend} actor: the tree has no module {prefix}...actor")
        return found

    return find


def _rollout(modules: dict[str, Module]) -> list[str]:
    entries = set(_need(_defining(modules, ("RolloutManager", "resolve_rollout_function_paths")), "rollout"))
    resolver = _defining(modules, ("resolve_rollout_function_paths",))["resolve_rollout_function_paths"]
    entries -= set(resolver)  # the arguments module only names the defaults: it is the driver's
    for name in resolver:
        tree = modules[name].tree
        assert tree is not None
        fn = next(n for n in tree.body if getattr(n, "name", "") == "resolve_rollout_function_paths")
        for node in ast.walk(fn):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("miles."):
                target = _deepest_module(modules, node.value)
                if target is None:
                    raise UsageError(f"start path rollout: {node.value!r} ({modules[name].path}) names no module")
                entries.add(target)
    return sorted(entries)


def _router(modules: dict[str, Module]) -> list[str]:
    return _need(_defining(modules, ("start_router",)), "router")


START_PATHS = {
    "driver": _driver,
    "fsdp_actor": _actor("fsdp_utils"),
    "megatron_actor": _actor("megatron_utils"),
    "rollout": _rollout,
    "router": _router,
}


def _deepest_module(modules: dict[str, Module], dotted: str) -> str | None:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


# --- reach -----------------------------------------------------------------------------------------------------


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def _internal_targets(modules: dict[str, Module], edge: Edge) -> tuple[list[str], bool]:
    """The tree's modules an internal import runs (parents first), and whether it resolved."""
    if edge.target not in modules and not _is_namespace(modules, edge.target):
        return [], False
    found = [p for p in [*_parents(edge.target), edge.target] if p in modules]
    found += [f"{edge.target}.{n}" for n in edge.names if f"{edge.target}.{n}" in modules]
    return found, True


def _is_namespace(modules: dict[str, Module], name: str) -> bool:
    return any(m.startswith(name + ".") for m in modules)


def reach(modules: dict[str, Module], entries: list[str], eager_only: bool) -> list[str]:
    """The miles modules that importing (and, unless eager_only, running) the entries imports, in BFS order."""
    seen: list[str] = []
    queue = deque(p for e in entries for p in [*_parents(e), e] if p in modules)
    while queue:
        name = queue.popleft()
        if name in seen:
            continue
        seen.append(name)
        mod = modules[name]
        if mod.tree is None:
            raise UsageError(f"{mod.error} (a miles module on a start path does not parse)")
        for edge in mod.edges:
            if edge.optional or (eager_only and edge.lazy) or not _is_own(edge.target):
                continue
            queue.extend(_internal_targets(modules, edge)[0])
    return seen


def start_path(modules: dict[str, Module], entries: list[str]) -> dict:
    reached = reach(modules, entries, eager_only=False)
    eager = set(reach(modules, entries, eager_only=True))
    imports: dict[str, dict] = {}
    optional: dict[str, set[str]] = {}
    unresolved: dict[str, set[str]] = {}
    for name in reached:
        mod = modules[name]
        for edge in mod.edges:
            if _is_own(edge.target):
                if not edge.optional and not _internal_targets(modules, edge)[1]:
                    unresolved.setdefault(edge.target, set()).add(f"{mod.path}:{edge.line}")
                continue
            if _is_stdlib(edge.target):
                continue
            if edge.optional:
                optional.setdefault(edge.target, set()).add(name)
                continue
            entry = imports.setdefault(edge.target, {"eager": False, "importers": set()})
            entry["importers"].add(name)
            entry["eager"] |= name in eager and not edge.lazy
    return {
        "entries": entries,
        "miles_modules": len(reached),
        "imports": {k: {"eager": v["eager"], "importers": sorted(v["importers"])} for k, v in sorted(imports.items())},
        "optional": {k: sorted(v) for k, v in sorted(optional.items()) if k not in imports},
        "unresolved": {k: sorted(v) for k, v in sorted(unresolved.items())},
    }


def reduced(names: list[str]) -> list[str]:
    """The names that no other name extends: importing `a.b.c` imports `a.b` and `a` too."""
    unique = sorted(set(names))
    return [n for n in unique if not any(o.startswith(n + ".") for o in unique)]


def derive(files: dict[str, str], commit: str) -> dict:
    modules = index(files)
    paths = {name: start_path(modules, find(modules)) for name, find in START_PATHS.items()}
    union: dict[str, dict] = {}
    for path_name, path in paths.items():
        for mod, info in path["imports"].items():
            entry = union.setdefault(mod, {"eager": False, "paths": []})
            entry["eager"] |= info["eager"]
            entry["paths"].append(path_name)
    return {
        "derived_by": "python3 -m ci.miles_start_imports (its docstring states the rules)",
        "miles_commit": commit,
        "start_paths": paths,
        "union": dict(sorted(union.items())),
        "gate": reduced(list(union)),
        "gate_eager": reduced([m for m, info in union.items() if info["eager"]]),
    }


def render(data: dict) -> str:
    """JSON, one line per module (a diff after a miles bump shows which modules moved)."""
    return _dump(data, 0) + "\n"


def _dump(value, depth: int) -> str:
    flat = json.dumps(value)
    nested = isinstance(value, dict) and any(isinstance(v, dict) for v in value.values())
    if not nested and (not isinstance(value, list) or len(flat) <= 100):
        return flat
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, list):
        return "[\n" + ",\n".join(inner + json.dumps(v) for v in value) + "\n" + pad + "]"
    items = [f"{inner}{json.dumps(k)}: {_dump(v, depth + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + pad + "}" if items else "{}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path, help="a miles tree: a directory or a git archive tarball")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", type=Path, help="write the JSON here (default: stdout)")
    out.add_argument("--check", type=Path, help="compare with this file; exit 1 when it differs")
    args = parser.parse_args(argv)
    try:
        text = render(derive(*read_source(args.source)))
        if args.check is not None:
            try:
                committed = args.check.read_text()
            except OSError as e:
                raise UsageError(f"{args.check}: {e.strerror}") from None
            if committed != text:
                print(f"{args.check} differs from what {args.source} gives: rerun with -o {args.check}")
                return 1
            print(f"{args.check} matches {args.source}")
            return 0
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
