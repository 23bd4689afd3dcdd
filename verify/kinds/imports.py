"""import: a module imports for real, catching missing dependencies and broken code on the start-up path.

Each module is imported in a fresh interpreter (the image's python), as a process of the image imports it: a
package that fails half-way leaves its already-loaded submodules behind in the process that tried, and a later
gate on one of them would pass there although ``import pkg.a`` runs ``pkg/__init__`` first and fails. Where the
config declares the CUDA driver stub (``stub_imports``), every child imports against it (see stub_import.py), so
a module whose import chain reaches a library that loads the driver imports as it would on a GPU host. A module
that resolves to a namespace package (a folder without ``__init__.py``, or several) is not the package the gate
names: FlashAttention 4 installs only ``flash_attn/cute/``, and ``import flash_attn`` then succeeds with
FlashAttention 2 absent.
"""

from __future__ import annotations

import re
import types
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..result import CheckResult
from .base import Check, Gate, RunnerTest, fresh_import, import_module, report_to_parent, short, str_list
from .stub_import import import_stub

if TYPE_CHECKING:
    from ..config import GateConfig

MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_GO_SPECIAL = set("\\.+*?()|[]{}^$")


def go_escape(text: str) -> str:
    """Escape for Go's RE2 (CST's regexps), which rejects Python's escapes of spaces and other non-punctuation."""
    return "".join("\\" + c if c in _GO_SPECIAL else c for c in text)


def namespace_portions(mod: types.ModuleType) -> Optional[List[str]]:
    """The folders of a namespace package (no ``__init__``: no ``__file__``, spec origin None or "namespace"), or
    None for any other module."""
    path = getattr(mod, "__path__", None)
    spec = getattr(mod, "__spec__", None)
    if path is None or getattr(mod, "__file__", None) is not None:
        return None
    if spec is not None and spec.origin not in (None, "namespace"):
        return None
    return [str(p) for p in path]


def judge(kind: str, module: str) -> CheckResult:
    """Import ``module`` here (after torch, ``import_module``) and judge it: what the child of a gate runs."""
    mod, failure = import_module(module)
    if failure is not None:
        return CheckResult(kind, module, False, failure.detail, log=failure.log)
    assert mod is not None
    portions = namespace_portions(mod)
    if portions is not None:
        found = ", ".join(portions) or "none"
        why = "a namespace package (no __init__.py), not the package: portions found: %s" % found
        return CheckResult(kind, module, False, short(why, 600))
    version = getattr(mod, "__version__", None)
    where = getattr(mod, "__file__", None) or "built-in"
    detail = "%s %s" % (version, where) if isinstance(version, str) else where
    return CheckResult(kind, module, True, short(detail))


def child(module: str) -> None:
    """The child's side (``_CHILD`` in base.py): import ``module`` as the gate does and report to the runner."""
    report_to_parent(judge(Import.kind, module))


class Import(Gate):
    key = "imports"
    kind = "import"
    order = 30
    passes_when = (
        "in a fresh interpreter (the image's python), `importlib.import_module` succeeds, after `import torch` "
        "where torch is installed (a torch extension loads only after it), against the driver stub where "
        "`stub_imports` declares one, and the module is not a namespace package; failure = class, message, "
        "innermost file:line"
    )

    def parse(self, value: Any, where: str) -> List[str]:
        return str_list(value, where, self.key, MODULE_RE)

    def dump(self, items: List[str]) -> Any:
        return list(items)

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--import", dest="imports", action="append", default=[], metavar="MODULE", help="import MODULE for real"
        )

    def from_flags(self, args: Any) -> List[str]:
        return list(args.imports)

    def start(self, items: List[str], cfg: "GateConfig") -> List[Check]:
        stub = import_stub(cfg)
        return [fresh_import(self.kind, module, stub) for module in items]

    def cst_tests(
        self, items: List[str], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        """Each module through the runner on a one-check config (with the config's driver stub, where it declares
        one): the same fresh child, stub and namespace rule as the build's gate step."""
        stub = {"stub_imports": cfg.to_dict()["stub_imports"]} if "stub_imports" in cfg else {}
        return [
            runner_test("%s %s" % (self.kind, module), self.kind, module, dict({self.key: self.dump([module])}, **stub))
            for module in items
        ]
