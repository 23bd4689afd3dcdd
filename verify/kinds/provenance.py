"""provenance: a package resolves from where the image installed it, not from a shadowing checkout.

The item names a top-level package or a dotted module (``megatron.core``), located without running package code.
A namespace package (folders without ``__init__.py``, each possibly from another distribution) is never judged by
its first folder: Megatron-LM's top ``megatron/`` is one, and megatron-energon adds a ``megatron/energon/``
portion to site-packages, which says nothing about where Megatron-LM comes from. Such a name fails, naming its
portions' regular subpackages: the gate names the real package to locate instead (``megatron.core``).
"""

from __future__ import annotations

import os
import re
from typing import Any, List, Tuple

from .. import locate
from ..result import CheckResult
from .base import ConfigError, Gate, config_error, short

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
Item = Tuple[str, str]  # (package, location)


def _location(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not (value == "site-packages" or os.path.isabs(value)):
        raise config_error(where, key, 'must be "site-packages" or an absolute directory, got %r' % (value,))
    return value


def parse_provenance_arg(text: str) -> Item:
    """Command-line form ``PKG=LOCATION``."""
    pkg, sep, loc = text.partition("=")
    if not sep or not _MODULE_RE.match(pkg):
        raise ConfigError("--provenance %s: expected PKG=site-packages or PKG=/absolute/dir" % text)
    return pkg, _location(loc, "--provenance", pkg)


class Provenance(Gate):
    key = "provenance"
    kind = "provenance"
    order = 10
    passes_when = (
        "the package's or dotted module's location (find_spec of the top-level name and a directory walk, no "
        "import) is under LOCATION: `site-packages` (sysconfig purelib/platlib, `site.getsitepackages()`) or an "
        "absolute directory; a shadowing checkout is named with the copy it shadows; a namespace package fails, "
        "naming its portions' packages (name the real one: `megatron.core`)"
    )
    never_does = "import"

    def parse(self, value: Any, where: str) -> List[Item]:
        if not isinstance(value, dict) or not value:
            raise config_error(where, self.key, "must be a non-empty object {package: location}")
        out = []
        for pkg, loc in value.items():
            if not _MODULE_RE.match(pkg):
                raise config_error(where, "provenance.%s" % pkg, "is not a package or module name")
            out.append((pkg, _location(loc, where, "provenance.%s" % pkg)))
        return out

    def dump(self, items: List[Item]) -> Any:
        return dict(items)

    def add_flags(self, parser: Any) -> None:
        parser.add_argument(
            "--provenance",
            action="append",
            default=[],
            metavar="PKG=LOCATION",
            help="PKG must resolve from LOCATION: site-packages or an absolute directory",
        )

    def from_flags(self, args: Any) -> List[Item]:
        return [parse_provenance_arg(text) for text in args.provenance]

    def merge(self, from_config: List[Item], from_flags: List[Item]) -> List[Item]:
        return list(dict(from_config + from_flags).items())  # a flag overrides the config's entry for its package

    def target(self, item: Item) -> str:
        return item[0]

    def check(self, item: Item) -> CheckResult:
        package, location = item
        found = locate.find_module(package)
        if found is None:
            return CheckResult("provenance", package, False, "%s not found on sys.path" % package)
        if locate.is_namespace(found):
            subs = locate.regular_subpackages(found)
            detail = "%s is a namespace package (portions: %s), not one package; name the package to locate%s" % (
                package,
                ", ".join(os.path.realpath(d) for d in found.dirs),
                ": %s" % ", ".join(subs) if subs else "",
            )
            return CheckResult("provenance", package, False, short(detail, 600))
        where = os.path.realpath(found.where)
        roots = locate.site_dirs() if location == "site-packages" else [location]
        copies = locate.copies_on_path(package)
        if any(locate.is_under(where, root) for root in roots):
            others = [c for c in copies if c != where]
            extra = " (other copies, not used: %s)" % ", ".join(others) if others else ""
            return CheckResult("provenance", package, True, short("from %s%s" % (where, extra)))
        expected = [c for c in copies if c != where and any(locate.is_under(c, r) for r in roots)]
        detail = "resolves to %s, not under %s" % (where, location)
        if expected:
            detail += "; it shadows %s" % ", ".join(expected)
        elif location == "site-packages":
            detail += " (%s)" % ", ".join(roots)
        return CheckResult("provenance", package, False, short(detail, 600))
