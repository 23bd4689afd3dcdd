"""The gate config: one JSON shape, rendered by the build plan from the image spec, validated here.

Every problem is a ConfigError whose message is one line naming the file and the key, because the file is
machine-written and a person reads the error in a build log. This is the one schema of the gate config: the
toolkit applies ``from_dict`` when a spec loads, so a config the runner would refuse never starts a build.
A config may not weaken itself: an explicitly empty check list, a command that swallows its own failure
(``|| true``) and a ``pip check`` allowance too short to name a conflict are refused.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

PLATFORMS = ("rocm", "cuda", "cpu")
TOP_KEYS = ("imports", "compile", "signatures", "platform", "pip_check", "provenance", "commands")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A shell fragment that turns any failure into success: `cmd || true`, `cmd || :`, `cmd; exit 0`.
_SWALLOW_RE = re.compile(r"\|\|\s*(true|:|exit\s+0)\b|;\s*(true|:|exit\s+0)\s*$")
MIN_ALLOW_MATCH = 8  # an allowance must name the conflict (a package and more), not one letter of it


class ConfigError(ValueError):
    """A bad config file or a bad command-line value; the message is one line. ``key`` and ``problem`` are set
    when one key is at fault, so a caller can report it in its own words (the toolkit names the spec file)."""

    key = ""
    problem = ""


@dataclass
class SignatureSpec:
    """``module:attr`` must exist, be callable and (when ``keywords`` is a list) accept exactly those keywords.

    With ``resolve``, ``module:attr`` names a call table instead (see checks.check_resolved_signature): the function,
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


@dataclass
class AllowRule:
    """A known ``pip check`` conflict that may stay: ``match`` is a substring of the conflict line."""

    match: str
    reason: str


@dataclass
class CommandSpec:
    name: str
    argv: List[str]
    timeout: float = 600.0


@dataclass
class GateConfig:
    imports: List[str] = field(default_factory=list)
    compile: List[str] = field(default_factory=list)
    signatures: List[SignatureSpec] = field(default_factory=list)
    platform: Optional[str] = None
    pip_check: Optional[List[AllowRule]] = None  # None: no pip check; a list (maybe empty): run it
    provenance: Dict[str, str] = field(default_factory=dict)
    commands: List[CommandSpec] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (
            self.imports
            or self.compile
            or self.signatures
            or self.platform
            or self.provenance
            or self.commands
            or self.pip_check is not None
        )


def _fail(where: str, key: str, msg: str) -> ConfigError:
    err = ConfigError("%s: key '%s' %s" % (where, key, msg))
    err.key, err.problem = key, msg
    return err


def _str_list(value: Any, where: str, key: str, pattern: Optional["re.Pattern[str]"] = None) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(where, key, "must be a list of non-empty strings")
    if not value:
        raise _fail(where, key, "must not be empty (an empty list checks nothing: leave the key out)")
    if pattern is not None:
        for i, v in enumerate(value):
            if not pattern.match(v):
                raise _fail(where, "%s[%d]" % (key, i), "is not a module name: %r" % v)
    return list(value)


def parse_signature_target(text: str, where: str, key: str) -> SignatureSpec:
    """``pkg.mod:Class.method`` → SignatureSpec (keywords filled in by the caller)."""
    module, sep, attr = text.partition(":")
    if not sep or not _MODULE_RE.match(module) or not _MODULE_RE.match(attr):
        raise _fail(where, key, "must look like 'package.module:attribute', got %r" % text)
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


def _location(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not (value == "site-packages" or os.path.isabs(value)):
        raise _fail(where, key, 'must be "site-packages" or an absolute directory, got %r' % (value,))
    return value


def parse_provenance_arg(text: str) -> Dict[str, str]:
    """Command-line form ``PKG=LOCATION``."""
    pkg, sep, loc = text.partition("=")
    if not sep or not _IDENT_RE.match(pkg):
        raise ConfigError("--provenance %s: expected PKG=site-packages or PKG=/absolute/dir" % text)
    return {pkg: _location(loc, "--provenance", pkg)}


def _signatures(value: Any, where: str) -> List[SignatureSpec]:
    if not isinstance(value, list) or not value:
        raise _fail(where, "signatures", "must be a non-empty list of objects")
    out = []
    for i, entry in enumerate(value):
        key = "signatures[%d]" % i
        if not isinstance(entry, dict):
            raise _fail(where, key, "must be an object with 'target'")
        unknown = set(entry) - {"target", "resolve", "keywords", "import"}
        if unknown:
            raise _fail(
                where, "%s.%s" % (key, sorted(unknown)[0]), "is not a known key (target, resolve, keywords, import)"
            )
        if "target" in entry and "resolve" in entry:
            raise _fail(where, key, "takes 'target' or 'resolve', not both")
        if "target" not in entry and "resolve" not in entry:
            raise _fail(where, key + ".target", "is required: 'package.module:attribute' (or 'resolve')")
        name = "resolve" if "resolve" in entry else "target"
        if not isinstance(entry[name], str):
            raise _fail(where, key + "." + name, "must be a string 'package.module:attribute'")
        spec = parse_signature_target(entry[name], where, key + "." + name)
        spec.resolve = name == "resolve"
        if entry.get("keywords") is not None:
            if spec.resolve:
                raise _fail(where, key + ".keywords", "comes from the resolve table; leave it out")
            kws = entry["keywords"]
            if not isinstance(kws, list) or not all(isinstance(k, str) and _IDENT_RE.match(k) for k in kws):
                raise _fail(where, key + ".keywords", "must be a list of parameter names")
            spec.keywords = list(kws)
        use_import = entry.get("import", True)
        if not isinstance(use_import, bool):
            raise _fail(where, key + ".import", "must be true or false")
        spec.use_import = use_import
        out.append(spec)
    return out


def _pip_check(value: Any, where: str) -> Optional[List[AllowRule]]:
    if value is None or value is False:
        return None
    if value is True:
        return []
    if not isinstance(value, dict) or set(value) - {"allow"}:
        raise _fail(where, "pip_check", 'must be null or an object {"allow": [...]}')
    allow = value.get("allow") or []
    if not isinstance(allow, list):
        raise _fail(where, "pip_check.allow", 'must be a list of {"match", "reason"} objects')
    rules = []
    for i, entry in enumerate(allow):
        key = "pip_check.allow[%d]" % i
        if not isinstance(entry, dict) or set(entry) - {"match", "reason"}:
            raise _fail(where, key, "must be an object with exactly 'match' and 'reason'")
        for part in ("match", "reason"):
            if not isinstance(entry.get(part), str) or not entry[part].strip():
                raise _fail(where, "%s.%s" % (key, part), "is required and must be a non-empty string")
        if len(entry["match"].strip()) < MIN_ALLOW_MATCH:
            raise _fail(
                where,
                key + ".match",
                "must name the conflict (at least %d characters), got %r" % (MIN_ALLOW_MATCH, entry["match"][:40]),
            )
        rules.append(AllowRule(entry["match"], entry["reason"]))
    return rules


def _commands(value: Any, where: str) -> List[CommandSpec]:
    if not isinstance(value, list) or not value:
        raise _fail(where, "commands", 'must be a non-empty list of {"name", "argv"} objects')
    out = []
    for i, entry in enumerate(value):
        key = "commands[%d]" % i
        if not isinstance(entry, dict) or set(entry) - {"name", "argv", "timeout"}:
            raise _fail(where, key, "must be an object with 'name', 'argv' and optionally 'timeout'")
        if not isinstance(entry.get("name"), str) or not entry["name"]:
            raise _fail(where, key + ".name", "is required and must be a non-empty string")
        argv = entry.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise _fail(where, key + ".argv", "must be a non-empty list of strings")
        for j, arg in enumerate(argv):
            if _SWALLOW_RE.search(arg):
                raise _fail(
                    where,
                    "%s.argv[%d]" % (key, j),
                    "swallows the command's failure (%r): a gate must be able to fail" % arg[:60],
                )
        timeout = entry.get("timeout", 600.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise _fail(where, key + ".timeout", "must be a positive number of seconds")
        out.append(CommandSpec(entry["name"], list(argv), float(timeout)))
    return out


def from_dict(data: Any, where: str = "config") -> GateConfig:
    """Validate a parsed config; ``where`` names the source in error messages."""
    if not isinstance(data, dict):
        raise ConfigError("%s: the top level must be a JSON object" % where)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise _fail(where, unknown[0], "is not a known key (%s)" % ", ".join(TOP_KEYS))
    cfg = GateConfig()
    if data.get("imports") is not None:
        cfg.imports = _str_list(data["imports"], where, "imports", _MODULE_RE)
    if data.get("compile") is not None:
        cfg.compile = _str_list(data["compile"], where, "compile")
    if data.get("signatures") is not None:
        cfg.signatures = _signatures(data["signatures"], where)
    platform = data.get("platform")
    if platform is not None and platform not in PLATFORMS:
        raise _fail(where, "platform", "must be one of %s, got %r" % ("|".join(PLATFORMS), platform))
    cfg.platform = platform
    cfg.pip_check = _pip_check(data.get("pip_check"), where)
    prov = data.get("provenance")
    if prov is not None:
        if not isinstance(prov, dict):
            raise _fail(where, "provenance", "must be an object {package: location}")
        for pkg, loc in prov.items():
            if not _IDENT_RE.match(pkg):
                raise _fail(where, "provenance.%s" % pkg, "is not a top-level package name")
            cfg.provenance[pkg] = _location(loc, where, "provenance.%s" % pkg)
    if data.get("commands") is not None:
        cfg.commands = _commands(data["commands"], where)
    return cfg


def load_config(path: str) -> GateConfig:
    """Read and validate a JSON gate config; any problem is a one-line ConfigError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError("%s: not UTF-8 text: %s" % (path, exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            "%s: invalid JSON at line %d column %d: %s" % (path, exc.lineno, exc.colno, exc.msg)
        ) from None
    return from_dict(data, path)
