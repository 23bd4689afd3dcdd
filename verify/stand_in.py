"""A stand-in build's excuses: which failed checks say only what the stand-in base lacks, never what is broken.

A GPU image built on a stand-in base (``build.py build --stand-in-base``) skips the steps this host cannot build
(CUDA compiles, sources it cannot fetch) and lacks what its base differs in. The toolkit writes both into the
config's ``stand_in`` section, derived from the plan, never by hand:

    {"not_built": [{"step": "flash-attn", "why": "compiles CUDA code", "modules": ["flash_attn"],
                    "distributions": ["flash-attn"], "paths": []}],
     "differs": [{"why": "sglang 0.5.16 from the index in place of ...", "modules": ["sglang"],
                  "distributions": ["sglang"], "paths": []}]}

A failed check is excused only when its own failure names what a rule covers: an import that found no module (or
only a namespace portion) of a listed module, a name missing from one, a file missing inside one (the innermost
frame of a FileNotFoundError or ImportError lies in it), a provenance gate of one, a ``pip check`` line or a
missing distribution's metadata about a listed distribution, or a listed file (a binary the step installs) that is
not there. Its status is then ``EXCUSED`` with ``not built here: STEP (why)`` or ``differs from base: WHY``; every
other failure stays a failure. A config without the section excuses nothing: a real build has none.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .kinds.base import config_error
from .kinds.imports import MODULE_RE
from .kinds.pip_check import _NAME_RE as DIST_RE
from .kinds.pip_check import PipLine, canonical
from .result import CheckResult

KEY = "stand_in"
SECTIONS = {"not_built": "not built here", "differs": "differs from base"}
# What an import's failure names: a module it did not find, or the module a missing name was imported from.
_MISSING = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
_NO_METADATA = re.compile(r"No package metadata was found for ([A-Za-z0-9._-]+)")
_NO_FILE = re.compile(r"(/[^\s:'\"]+): No such file or directory|No such file or directory: '(/[^']+)'")
_FROM = re.compile(r"cannot import name '[A-Za-z0-9_]+' from '([A-Za-z0-9_.]+)'")
# An import that failed inside a package for want of a file (a library a skipped step builds: TransformerEngine's
# torch extension): the innermost frame's file names the package.
_MISSING_FILE = re.compile(r"^(FileNotFoundError|ImportError|ModuleNotFoundError): .* at (/\S+):\d+$")
IMPORT_KINDS = ("import", "stub-import", "compile")


def parse(value: Any, where: str) -> Dict[str, List[Dict[str, Any]]]:
    """The section, checked: each rule has a one-line ``why``, module names, distribution names (``step`` too, in
    ``not_built``), and names at least one module or distribution."""
    if not isinstance(value, dict) or set(value) - set(SECTIONS):
        raise config_error(where, KEY, "must be a mapping of %s" % ", ".join(SECTIONS))
    out: Dict[str, List[Dict[str, Any]]] = {}
    for section, rules in value.items():
        key = "%s.%s" % (KEY, section)
        if not isinstance(rules, list):
            raise config_error(where, key, "must be a list of rules")
        for i, rule in enumerate(rules):
            at = "%s[%d]" % (key, i)
            needed = {"why", "modules", "distributions", "paths"} | ({"step"} if section == "not_built" else set())
            if not isinstance(rule, dict) or set(rule) != needed:
                raise config_error(where, at, "must have exactly the keys %s" % ", ".join(sorted(needed)))
            for text_key in needed & {"why", "step"}:
                if not isinstance(rule[text_key], str) or not rule[text_key].strip() or "\n" in rule[text_key]:
                    raise config_error(where, "%s.%s" % (at, text_key), "must be one line of text")
            mods, dists = rule["modules"], rule["distributions"]
            if not isinstance(mods, list) or not all(isinstance(m, str) and MODULE_RE.match(m) for m in mods):
                raise config_error(where, at + ".modules", "must be a list of module names")
            if not isinstance(dists, list) or not all(isinstance(d, str) and DIST_RE.match(d) for d in dists):
                raise config_error(where, at + ".distributions", "must be a list of distribution names")
            paths = rule["paths"]
            if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") for p in paths):
                raise config_error(where, at + ".paths", "must be a list of absolute paths")
            if not mods and not dists and not paths:
                raise config_error(where, at, "names no module, distribution or path: it could excuse nothing")
        out[section] = [dict(r) for r in rules]
    return out


def reason(rule: Dict[str, Any], section: str) -> str:
    head = SECTIONS[section]
    return (
        "%s: %s (%s)" % (head, rule["step"], rule["why"]) if section == "not_built" else "%s: %s" % (head, rule["why"])
    )


def _covers(modules: List[str], name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def named_modules(res: CheckResult) -> List[str]:
    """The modules a failed import check's failure is about: those it found missing, the module a missing name was
    imported from, and the check's own module where the import found only a namespace portion."""
    if res.kind == "provenance":  # where a module resolves: the module is what a difference names
        return [res.target]
    if res.kind not in IMPORT_KINDS:
        return []
    found = _MISSING.findall(res.detail) + _FROM.findall(res.detail)
    if "namespace package" in res.detail:
        found.append(res.target)
    inside = _MISSING_FILE.match(res.detail)
    if inside:
        parts = inside.group(2).split("/")
        found += [parts[i + 1] for i, part in enumerate(parts[:-2]) if part in ("site-packages", "dist-packages")]
    return found


def excuse(res: CheckResult, rules: Optional[Dict[str, List[Dict[str, Any]]]]) -> CheckResult:
    """``res`` with ``excused`` set where a rule covers its failure (not_built first), else ``res`` as it was."""
    if res.passed or not rules:
        return res
    modules = named_modules(res)
    line = PipLine.parse(res.detail) if res.kind == "pip-check" else None
    unmet = {canonical(n) for n in _NO_METADATA.findall(res.detail)}
    if line is not None and line.shape in ("missing", "version"):
        unmet |= {line.requirement or "", line.dist}
    files = {a or b for a, b in _NO_FILE.findall(res.detail)}
    for section in SECTIONS:
        for rule in rules.get(section, []):
            dists = {canonical(d) for d in rule["distributions"]}
            if any(_covers(rule["modules"], m) for m in modules) or unmet & dists or files & set(rule["paths"]):
                res.excused = reason(rule, section)
                return res
    return res
