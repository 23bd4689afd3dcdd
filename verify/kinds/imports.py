"""import: a module imports for real, catching missing dependencies and broken code on the start-up path."""

from __future__ import annotations

import re
from typing import Any, Dict, List

from ..result import CheckResult
from .base import Gate, RunnerTest, import_module, short, str_list

MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_GO_SPECIAL = set("\\.+*?()|[]{}^$")


def go_escape(text: str) -> str:
    """Escape for Go's RE2 (CST's regexps), which rejects Python's escapes of spaces and other non-punctuation."""
    return "".join("\\" + c if c in _GO_SPECIAL else c for c in text)


def cst_import_script(module: str) -> str:
    """The script of a CST import test: the runner's rule (torch first where installed) in a few readable lines."""
    lines = ["import importlib, importlib.util"]
    if module.split(".")[0] != "torch":
        lines += ["if importlib.util.find_spec('torch') is not None:", "    import torch  # before a torch extension"]
    return "\n".join(lines + ["importlib.import_module(%r)" % module, "print('imported %s')" % module]) + "\n"


class Import(Gate):
    key = "imports"
    kind = "import"
    order = 30
    passes_when = (
        "`importlib.import_module` succeeds, after `import torch` where torch is installed (a torch extension "
        "loads only after it); failure = class, message, innermost file:line"
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

    def check(self, module: str) -> CheckResult:
        mod, failure = import_module(module)
        if failure is not None:
            return failure
        version = getattr(mod, "__version__", None)
        where = getattr(mod, "__file__", None) or "built-in/namespace"
        detail = "%s %s" % (version, where) if isinstance(version, str) else where
        return CheckResult("import", module, True, short(detail))

    def cst_tests(self, items: List[str], python: str, runner_test: RunnerTest) -> List[Dict[str, Any]]:
        """A readable ``python -c "import X"`` per module, after torch as the runner imports it (``torch_first``):
        it needs nothing of ours in the image."""
        return [
            {
                "name": "import %s" % module,
                "command": python,
                "args": ["-c", cst_import_script(module)],
                "exitCode": 0,
                "expectedOutput": ["(?m)^imported %s$" % go_escape(module)],
            }
            for module in items
        ]
