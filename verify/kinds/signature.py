"""signature: a function exists, is callable and takes the call its caller makes, so API drift fails the build.

Three forms: imported (``inspect.signature``), read from source with ``ast`` (``"import": false``, never importing
the module) and resolved through the caller's own call table (``"resolve"``: the caller's candidate modules and
keywords, read from source), so the gate holds no module path of its own that could drift from what is called.
"""

from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..result import CheckResult
from ..source_signature import SourceSignatureError, literal_from_source, signature_from_source
from .base import ConfigError, Gate, RunnerTest, config_error, import_module, short

if TYPE_CHECKING:
    from ..config import GateConfig

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class SignatureSpec:
    """``module:attr`` must exist, be callable and (when ``keywords`` is a list) accept exactly those keywords.

    With ``resolve``, ``module:attr`` names a call table instead (see check_resolved_signature): the function,
    its candidate modules and the keywords come from that table, read from source.
    """

    module: str
    attr: str
    keywords: Optional[List[str]] = None
    use_import: bool = True
    resolve: bool = False

    @property
    def target(self) -> str:
        return "%s:%s" % (self.module, self.attr)


def parse_signature_target(text: str, where: str, key: str) -> SignatureSpec:
    """``pkg.mod:Class.method`` → SignatureSpec (keywords filled in by the caller)."""
    module, sep, attr = text.partition(":")
    if not sep or not _MODULE_RE.match(module) or not _MODULE_RE.match(attr):
        raise config_error(where, key, "must look like 'package.module:attribute', got %r" % text)
    return SignatureSpec(module, attr)


def parse_signature_arg(text: str, use_import: bool = True) -> SignatureSpec:
    """Command-line form ``MODULE:ATTR[=KW1,KW2,...]``; ``MODULE:ATTR=`` means "callable with no arguments"."""
    target, sep, kws = text.partition("=")
    spec = parse_signature_target(target, "--signature", target)
    spec.use_import = use_import
    if sep:
        spec.keywords = [k.strip() for k in kws.split(",") if k.strip()]
        for k in spec.keywords:
            if not _IDENT_RE.match(k):
                raise ConfigError("--signature %s: %r is not a keyword name" % (text, k))
    return spec


def _signatures(value: Any, where: str) -> List[SignatureSpec]:
    if not isinstance(value, list) or not value:
        raise config_error(where, "signatures", "must be a non-empty list of objects")
    out = []
    for i, entry in enumerate(value):
        key = "signatures[%d]" % i
        if not isinstance(entry, dict):
            raise config_error(where, key, "must be an object with 'target'")
        unknown = set(entry) - {"target", "resolve", "keywords", "import"}
        if unknown:
            raise config_error(
                where, "%s.%s" % (key, sorted(unknown)[0]), "is not a known key (target, resolve, keywords, import)"
            )
        if "target" in entry and "resolve" in entry:
            raise config_error(where, key, "takes 'target' or 'resolve', not both")
        if "target" not in entry and "resolve" not in entry:
            raise config_error(where, key + ".target", "is required: 'package.module:attribute' (or 'resolve')")
        name = "resolve" if "resolve" in entry else "target"
        if not isinstance(entry[name], str):
            raise config_error(where, key + "." + name, "must be a string 'package.module:attribute'")
        spec = parse_signature_target(entry[name], where, key + "." + name)
        spec.resolve = name == "resolve"
        if entry.get("keywords") is not None:
            if spec.resolve:
                raise config_error(where, key + ".keywords", "comes from the resolve table; leave it out")
            kws = entry["keywords"]
            if not isinstance(kws, list) or not all(isinstance(k, str) and _IDENT_RE.match(k) for k in kws):
                raise config_error(where, key + ".keywords", "must be a list of parameter names")
            spec.keywords = list(kws)
        use_import = entry.get("import", True)
        if not isinstance(use_import, bool):
            raise config_error(where, key + ".import", "must be true or false")
        spec.use_import = use_import
        out.append(spec)
    return out


def _live_signature(spec: SignatureSpec) -> Tuple[Optional[inspect.Signature], str, Optional[CheckResult]]:
    mod, failure = import_module(spec.module)
    if failure is not None:
        failure.kind, failure.target = "signature", spec.target
        failure.detail = "import %s failed: %s" % (spec.module, failure.detail)
        return None, "", failure
    owner, obj = None, mod
    for part in spec.attr.split("."):
        if not hasattr(obj, part):
            what = getattr(obj, "__name__", type(obj).__name__)
            return None, "", CheckResult("signature", spec.target, False, "%s has no attribute %r" % (what, part))
        owner, obj = obj, getattr(obj, part)
    if not callable(obj):
        return (
            None,
            "",
            CheckResult("signature", spec.target, False, "%s is a %s, not callable" % (spec.attr, type(obj).__name__)),
        )
    if spec.keywords is None:
        return None, "callable %s" % type(obj).__name__, None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as exc:
        return None, "", CheckResult("signature", spec.target, False, "no signature available: %s" % exc)
    last = spec.attr.split(".")[-1]
    if inspect.isclass(owner) and isinstance(inspect.getattr_static(owner, last, None), types.FunctionType):
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])  # called on an instance
    return sig, "", None


def check_signature(spec: SignatureSpec) -> CheckResult:
    """The attribute exists, is callable, and a call with the caller's keywords binds (API drift fails here)."""
    if spec.resolve:
        return check_resolved_signature(spec)
    if spec.use_import:
        sig, note, failure = _live_signature(spec)
        if failure is not None:
            return failure
        origin = "imported"
    else:
        try:
            sig, path, line, decorators = signature_from_source(spec.module, spec.attr)
        except SourceSignatureError as exc:
            return CheckResult("signature", spec.target, False, short(str(exc)))
        origin = "source %s:%d" % (path, line)
        if decorators:
            origin += " decorated @" + ", @".join(decorators)
        note = "def found"
    if spec.keywords is None:
        text = note if sig is None else "callable %s" % sig
        return CheckResult("signature", spec.target, True, short("%s (%s)" % (text, origin)))
    assert sig is not None
    try:
        sig.bind(**{kw: object() for kw in spec.keywords})
    except TypeError as exc:
        detail = "%s; signature is %s (%s)" % (exc, sig, origin)
        return CheckResult("signature", spec.target, False, short(detail, 600), log=detail)
    return CheckResult(
        "signature", spec.target, True, short("binds %s (%s)" % (", ".join(spec.keywords) or "no arguments", origin))
    )


def _call_table(value: object, where: str) -> Tuple[str, List[str], List[str], List[List[str]]]:
    """(function, modules, keywords, groups) from a call table, or SourceSignatureError saying what is wrong."""

    def names(v, pattern):
        return isinstance(v, (list, tuple)) and all(isinstance(x, str) and pattern.match(x) for x in v)

    if not isinstance(value, dict):
        raise SourceSignatureError("%s: a call table must be a dict, got %s" % (where, type(value).__name__))
    function, modules = value.get("function"), value.get("modules")
    keywords, groups = value.get("keywords", []), value.get("groups", [])
    if not (isinstance(function, str) and _IDENT_RE.match(function)):
        raise SourceSignatureError("%s: 'function' must be a function name" % where)
    if not (modules and names(modules, _MODULE_RE)):
        raise SourceSignatureError("%s: 'modules' must be a non-empty list of module names" % where)
    if not names(keywords, _IDENT_RE):
        raise SourceSignatureError("%s: 'keywords' must be a list of parameter names" % where)
    if not (isinstance(groups, (list, tuple)) and all(names(g, _IDENT_RE) and g for g in groups)):
        raise SourceSignatureError("%s: 'groups' must be a list of non-empty lists of parameter names" % where)
    return function, list(modules), list(keywords), [list(g) for g in groups]


def _call_keywords(sig: inspect.Signature, keywords: List[str], groups: List[List[str]]) -> List[str]:
    """What the caller passes to this signature: every keyword, plus each group the function takes any name of."""
    out = list(keywords)
    for group in groups:
        if any(name in sig.parameters for name in group):
            out += [name for name in group if name not in out]
    return out


def _binds(sig: inspect.Signature, kws: List[str]) -> Optional[str]:
    """None when a keyword call with ``kws`` binds to named parameters; else why not."""
    named = {n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    absorbed = [k for k in kws if k not in named]
    if absorbed:  # a **kwargs would swallow a renamed keyword; the caller needs the parameter itself
        return "no parameter named %s" % ", ".join(absorbed)
    try:
        sig.bind(**{kw: object() for kw in kws})
    except TypeError as exc:
        return str(exc)
    return None


def check_resolved_signature(spec: SignatureSpec) -> CheckResult:
    """Resolve a function through a caller's call table, the way the caller does, and check that the call binds.

    ``spec.module:spec.attr`` names a literal dict kept by the caller (read from source, nothing imported):
    ``function``, ``modules`` (tried in order: the first that defines the function and takes the call wins, like
    the caller's own fallback), ``keywords`` (passed by every call) and ``groups`` (passed together where the function
    takes any of them). So the gate holds no module path of its own that could drift from what the caller calls.
    """
    ref = spec.target
    try:
        value, table_file, table_line = literal_from_source(spec.module, spec.attr)
        function, modules, keywords, groups = _call_table(value, "%s:%d" % (table_file, table_line))
    except SourceSignatureError as exc:
        return CheckResult("signature", ref, False, short("call table %s: %s" % (ref, exc), 600))
    tried = []
    for module in modules:
        candidate = SignatureSpec(module, function, keywords=[], use_import=spec.use_import)
        if spec.use_import:
            sig, _, failure = _live_signature(candidate)
            if failure is not None:
                tried.append("%s: %s" % (candidate.target, failure.detail))
                continue
            origin = "imported"
        else:
            try:
                sig, path, line, _ = signature_from_source(module, function)
            except SourceSignatureError as exc:
                tried.append("%s: %s" % (candidate.target, exc))
                continue
            origin = "source %s:%d" % (path, line)
        assert sig is not None  # keywords=[]: a signature comes with no failure
        kws = _call_keywords(sig, keywords, groups)
        problem = _binds(sig, kws)
        if problem is None:
            detail = "binds %s (%s; resolved by %s)" % (", ".join(kws), origin, ref)
            return CheckResult("signature", candidate.target, True, short(detail, 600))
        tried.append("%s: %s; signature is %s (%s)" % (candidate.target, problem, sig, origin))
    detail = "no candidate of %s takes the call: %s" % (ref, " | ".join(tried))
    return CheckResult("signature", ref, False, short(detail, 1200), log="\n".join(tried))


def _entry(spec: SignatureSpec) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"resolve" if spec.resolve else "target": spec.target, "import": spec.use_import}
    if spec.keywords is not None:
        entry["keywords"] = spec.keywords
    return entry


class Signature(Gate):
    key = "signatures"
    kind = "signature"
    order = 40
    passes_when = (
        "attribute exists, is callable, `inspect.signature(...).bind(**{kw: object()})` succeeds; no `keywords`: "
        'existence + callable. `"import": false` (`--signature-source`): the same on a signature built from the '
        "`def` in the source (`ast`; follows `from x import name` re-exports; `Class` → `__init__`, `Class.method` "
        '→ without `self`). `"resolve": "MODULE:TABLE"`: the caller\'s call table (a literal dict read from source: '
        "`function`, `modules` tried in order, `keywords`, `groups` passed together where accepted) picks the first "
        "module whose function takes the call, as the caller does; every keyword must be a named parameter"
    )
    never_does = "import the module, in the source forms"

    def parse(self, value: Any, where: str) -> List[SignatureSpec]:
        return _signatures(value, where)

    def dump(self, items: List[SignatureSpec]) -> Any:
        return [_entry(spec) for spec in items]

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--signature",
            action="append",
            default=[],
            metavar="MODULE:ATTR[=KW1,KW2,...]",
            help="ATTR exists, is callable and binds the given keywords (imports MODULE)",
        )
        parser.add_argument(
            "--signature-source",
            action="append",
            default=[],
            metavar="MODULE:ATTR[=KW1,KW2,...]",
            help="like --signature, but read from the module's source with ast, never importing it",
        )

    def from_flags(self, args: Any) -> List[SignatureSpec]:
        return [parse_signature_arg(s, use_import=True) for s in args.signature] + [
            parse_signature_arg(s, use_import=False) for s in args.signature_source
        ]

    def target(self, item: SignatureSpec) -> str:
        return item.target

    def check(self, item: SignatureSpec) -> CheckResult:
        return check_signature(item)

    def cst_tests(
        self, items: List[SignatureSpec], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        tests = Gate.cst_tests(self, items, python, runner_test, cfg)
        for spec, test in zip(items, tests):
            if spec.resolve:  # the PASS line names the function the table resolved to, known only in the image
                test["expectedOutput"] = ["(?m)^PASS +signature "]
        return tests
