"""The gate checks. Each takes one target and returns CheckResult(s); none of them raises.

They run in the image's own interpreter, in one process (imports are shared, as in the application), except
``pip check`` and configured commands, which are subprocesses by nature.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import os
import re
import subprocess
import sys
import time
import traceback
import types
from typing import List, Optional, Tuple

from . import PACKAGE_DIR, locate
from .config import AllowRule, CommandSpec, SignatureSpec
from .result import CheckResult
from .source_signature import SourceSignatureError, literal_from_source, signature_from_source

NVIDIA_CUDA_WHEEL = "nvidia-*-cu*"
_IMPORTLIB_DIR = os.path.dirname(importlib.__file__)
_MAX_DETAIL = 300


def _short(text: str, limit: int = _MAX_DETAIL) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _innermost(exc: BaseException) -> Optional[Tuple[str, int]]:
    """The file:line a person should open: the bad source for a SyntaxError, else the deepest real frame."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno or 0
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        name = frame.filename
        if name.startswith("<frozen") or name.startswith((PACKAGE_DIR + os.sep, _IMPORTLIB_DIR + os.sep)):
            continue
        return name, frame.lineno or 0
    return None


def describe_exception(exc: BaseException) -> str:
    """``Class: message at file:line`` in one line."""
    msg = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    text = _short("%s: %s" % (type(exc).__name__, msg), 240)  # shorten the message, never the location
    where = _innermost(exc)
    if where is not None:
        text += " at %s:%d" % where
    return text


def _import(module: str) -> Tuple[Optional[types.ModuleType], Optional[CheckResult]]:
    try:
        return importlib.import_module(module), None
    except (Exception, SystemExit) as exc:  # an import may call sys.exit(); that is a failed import, not ours
        return None, CheckResult("import", module, False, describe_exception(exc), log=traceback.format_exc())


def check_import(module: str) -> CheckResult:
    """Import the module for real: catches missing dependencies and broken code on the start-up path."""
    mod, failure = _import(module)
    if failure is not None:
        return failure
    version = getattr(mod, "__version__", None)
    where = getattr(mod, "__file__", None) or "built-in/namespace"
    detail = "%s %s" % (version, where) if isinstance(version, str) else where
    return CheckResult("import", module, True, _short(detail))


# --- compile -------------------------------------------------------------------------------------------------


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
    out = []
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


def check_compile(target: str) -> CheckResult:
    """Byte-compile every .py of a package or directory, so a syntax error in a lazily loaded module fails too."""
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
        return CheckResult("compile", target, False, _short(detail, 500), log="\n".join(errors))
    return CheckResult("compile", target, True, "%d files compiled in %s" % (len(files), where))


# --- signature -----------------------------------------------------------------------------------------------


def _live_signature(spec: SignatureSpec) -> Tuple[Optional[inspect.Signature], str, Optional[CheckResult]]:
    mod, failure = _import(spec.module)
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
            return CheckResult("signature", spec.target, False, _short(str(exc)))
        origin = "source %s:%d" % (path, line)
        if decorators:
            origin += " decorated @" + ", @".join(decorators)
        note = "def found"
    if spec.keywords is None:
        text = note if sig is None else "callable %s" % sig
        return CheckResult("signature", spec.target, True, _short("%s (%s)" % (text, origin)))
    assert sig is not None
    try:
        sig.bind(**{kw: object() for kw in spec.keywords})
    except TypeError as exc:
        detail = "%s; signature is %s (%s)" % (exc, sig, origin)
        return CheckResult("signature", spec.target, False, _short(detail, 600), log=detail)
    return CheckResult(
        "signature", spec.target, True, _short("binds %s (%s)" % (", ".join(spec.keywords) or "no arguments", origin))
    )


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _call_table(value: object, where: str) -> Tuple[str, List[str], List[str], List[List[str]]]:
    """(function, modules, keywords, groups) from a call table, or SourceSignatureError saying what is wrong."""

    def names(v, pattern):
        return isinstance(v, (list, tuple)) and all(isinstance(x, str) and pattern.match(x) for x in v)

    if not isinstance(value, dict):
        raise SourceSignatureError("%s: a call table must be a dict, got %s" % (where, type(value).__name__))
    function, modules = value.get("function"), value.get("modules")
    keywords, groups = value.get("keywords", []), value.get("groups", [])
    if not (isinstance(function, str) and _IDENT.match(function)):
        raise SourceSignatureError("%s: 'function' must be a function name" % where)
    if not (modules and names(modules, _MODULE)):
        raise SourceSignatureError("%s: 'modules' must be a non-empty list of module names" % where)
    if not names(keywords, _IDENT):
        raise SourceSignatureError("%s: 'keywords' must be a list of parameter names" % where)
    if not (isinstance(groups, (list, tuple)) and all(names(g, _IDENT) and g for g in groups)):
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
        return CheckResult("signature", ref, False, _short("call table %s: %s" % (ref, exc), 600))
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
        kws = _call_keywords(sig, keywords, groups)
        problem = _binds(sig, kws)
        if problem is None:
            detail = "binds %s (%s; resolved by %s)" % (", ".join(kws), origin, ref)
            return CheckResult("signature", candidate.target, True, _short(detail, 600))
        tried.append("%s: %s; signature is %s (%s)" % (candidate.target, problem, sig, origin))
    detail = "no candidate of %s takes the call: %s" % (ref, " | ".join(tried))
    return CheckResult("signature", ref, False, _short(detail, 1200), log="\n".join(tried))


# --- platform ------------------------------------------------------------------------------------------------


def cuda_wheels() -> List[str]:
    """Installed distributions named like ``nvidia-*-cu*`` (CUDA runtime wheels that must not be in a ROCm image)."""
    import importlib.metadata  # only the rocm gate needs it; it costs ~15 ms of start-up

    names = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name") if dist.metadata is not None else None
        if not name:
            continue
        norm = re.sub(r"[-_.]+", "-", name).lower()
        if fnmatch.fnmatchcase(norm, NVIDIA_CUDA_WHEEL):
            names.add(norm)
    return sorted(names)


def check_platform(platform: str) -> CheckResult:
    """torch was built for the platform the image claims (and a ROCm image carries no CUDA wheels)."""
    mod, failure = _import("torch")
    build = "torch not importable"
    hip = cuda = None
    if mod is not None:
        version = getattr(mod, "version", None)
        hip, cuda = getattr(version, "hip", None), getattr(version, "cuda", None)
        build = "torch %s hip=%s cuda=%s" % (getattr(mod, "__version__", "?"), hip, cuda)
    problems = []
    if platform in ("rocm", "cuda") and mod is None:
        problems.append("torch import failed: %s" % failure.detail)
    elif platform == "rocm":
        if not hip:
            problems.append("torch.version.hip is not set")
        wheels = cuda_wheels()
        if wheels:
            problems.append("CUDA wheels installed: %s" % ", ".join(wheels))
    elif platform == "cuda" and not cuda:
        problems.append("torch.version.cuda is not set")
    if problems:
        return CheckResult(
            "platform",
            platform,
            False,
            _short("; ".join(problems) + " (%s)" % build),
            log=failure.log if failure else "",
        )
    return CheckResult("platform", platform, True, build)


# --- pip check -----------------------------------------------------------------------------------------------


class PipRun:
    """A ``pip check`` started in the background (it is read-only, so it can overlap the in-process checks)."""

    def __init__(self, timeout: float = 600.0):
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONWARNINGS="ignore")
        self.timeout = timeout
        self.started = time.perf_counter()
        self.error: Optional[str] = None
        self.proc: Optional[subprocess.Popen] = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pip", "check"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                universal_newlines=True,
                errors="replace",
            )
        except OSError as exc:
            self.error = str(exc)

    def results(self, allow: List[AllowRule]) -> List[CheckResult]:
        """Wait for pip and judge its output: one result per conflict line; allowed lines pass, marked allowed."""
        results = self._judge(allow)
        seconds = (time.perf_counter() - self.started) / len(results)
        for res in results:
            res.seconds = seconds
        return results

    def _judge(self, allow: List[AllowRule]) -> List[CheckResult]:
        if self.proc is None:
            return [CheckResult("pip-check", "pip check", False, _short(self.error or "pip did not start"))]
        try:
            left = self.timeout - (time.perf_counter() - self.started)
            stdout, stderr = self.proc.communicate(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return [CheckResult("pip-check", "pip check", False, "timed out after %gs" % self.timeout)]
        log = stdout + stderr
        lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("No broken requirements found")]
        if "No module named pip" in stderr:
            return [
                CheckResult("pip-check", "pip check", False, "pip is not installed for %s" % sys.executable, log=log)
            ]
        if not lines:
            if self.proc.returncode == 0:
                return [CheckResult("pip-check", "pip check", True, "No broken requirements found.", log=log)]
            last = (stderr.strip().splitlines() or ["(no output)"])[-1]
            return [
                CheckResult(
                    "pip-check", "pip check", False, _short("exit %d: %s" % (self.proc.returncode, last)), log=log
                )
            ]
        results = []
        for line in lines:
            pkg = line.split()[0]
            rule = next((r for r in allow if r.match in line), None)
            if rule is not None:
                results.append(
                    CheckResult(
                        "pip-check", pkg, True, _short("allowed (%s): %s" % (rule.reason, line)), log=line, allowed=True
                    )
                )
            else:
                results.append(CheckResult("pip-check", pkg, False, _short(line), log=log))
        return results


# --- provenance ----------------------------------------------------------------------------------------------


def check_provenance(package: str, location: str) -> CheckResult:
    """The package resolves from where the image installed it, not from a checkout earlier on sys.path."""
    found = locate.find_top_level(package)
    if found is None:
        return CheckResult("provenance", package, False, "%s not found on sys.path" % package)
    where = os.path.realpath(found.where)
    roots = locate.site_dirs() if location == "site-packages" else [location]
    copies = locate.copies_on_path(package)
    if any(locate.is_under(where, root) for root in roots):
        others = [c for c in copies if c != where]
        extra = " (other copies, not used: %s)" % ", ".join(others) if others else ""
        return CheckResult("provenance", package, True, _short("from %s%s" % (where, extra)))
    expected = [c for c in copies if c != where and any(locate.is_under(c, r) for r in roots)]
    detail = "resolves to %s, not under %s" % (where, location)
    if expected:
        detail += "; it shadows %s" % ", ".join(expected)
    elif location == "site-packages":
        detail += " (%s)" % ", ".join(roots)
    return CheckResult("provenance", package, False, _short(detail, 600))


# --- commands ------------------------------------------------------------------------------------------------


class CommandRun:
    """A gate command started in the background (like pip check, it overlaps the in-process checks)."""

    def __init__(self, spec: CommandSpec):
        self.spec, self.started, self.error = spec, time.perf_counter(), None
        self.argv = [a.replace("{python}", sys.executable) for a in spec.argv]
        self.proc: Optional[subprocess.Popen] = None
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, errors="replace"
            )
        except OSError as exc:
            self.error = "cannot run %s: %s" % (self.argv[0], exc.strerror)

    def result(self) -> CheckResult:
        """Wait for the command: exit 0 passes, else the last output line is the detail."""
        res = self._judge()
        res.seconds = time.perf_counter() - self.started
        return res

    def _judge(self) -> CheckResult:
        name = self.spec.name
        if self.proc is None:
            return CheckResult("command", name, False, self.error or "did not start")
        try:
            left = self.spec.timeout - (time.perf_counter() - self.started)
            out, _ = self.proc.communicate(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            return CheckResult("command", name, False, "timed out after %gs" % self.spec.timeout, log=out or "")
        lines = [ln for ln in out.splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else "(no output)"
        if self.proc.returncode != 0:
            return CheckResult("command", name, False, _short("exit %d: %s" % (self.proc.returncode, last)), log=out)
        return CheckResult("command", name, True, _short(last), log=out)
