"""Which git ref names the toolkit accepts as data: a branch or tag a policy follows, a ref a pull request names.

A ref name reaches `git ls-remote` as one argument (never a shell line), but it also names what a lock records and
what a CI log prints, so the accepted set is deliberately narrower than git's own `check-ref-format`: ASCII
letters, digits and `._/+-`, no empty or dot-leading component, no `..`, nothing git would refuse (`.lock` at the
end, a leading `-` that would read as an option).
"""

from __future__ import annotations

import re

from toolkit.errors import short

REF_NAME_RE = re.compile(r"[A-Za-z0-9._/+-]{1,200}")


def ref_name_problem(name) -> str | None:
    """Why `name` is not a safe ref name (a branch or tag, or a full `refs/...` name), or None."""
    if not isinstance(name, str) or not REF_NAME_RE.fullmatch(name):
        return f"not a ref name (letters, digits, '._/+-', at most 200): {short(name)}"
    parts = name.split("/")
    if (
        name.startswith("-")
        or ".." in name
        or name.endswith((".lock", "/", "."))
        or any(not p or p.startswith(".") for p in parts)
    ):
        return f"not a ref name git accepts: {short(name)}"
    return None
