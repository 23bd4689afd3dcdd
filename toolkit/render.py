"""Render a plan's Dockerfile from its Jinja2 template. Pure: the same plan gives byte-identical text.

Values are data: templates quote them (`dq` for ENV/LABEL/ARG values, `shquote` for words of RUN lines), and a
value no quoting can hold on one line (a control character) or a name that cannot be quoted (an ENV/ARG name)
is refused here even if it slipped past spec validation.
"""

from __future__ import annotations

import functools
import posixpath
import shlex

import jinja2

from toolkit.errors import UsageError, short
from toolkit.plan import SECRET_PIP_CA, Plan
from toolkit.sources import context_name, git_components
from toolkit.spec import ROOT
from toolkit.spec_values import IDENT_RE, MAX_VALUE_BYTES, reference_problem, text_problem
from toolkit.wheelhouse import image_ref

TEMPLATES = ROOT / "templates"


def dockerfile_quote(value) -> str:
    """A double-quoted Dockerfile word (ENV, LABEL, ARG values): `\\`, `"` and `$` escaped, so the value is taken
    literally, with no variable expansion and no way to end the word or the instruction."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{text}"'


def shell_quote(value) -> str:
    """One shell word for a RUN line (bash): the value is an argument, never shell syntax."""
    return shlex.quote(str(value))


def guard(variant) -> None:
    """Refuse what no template quoting can make safe: a line break or other control character in any value, an
    ENV/ARG name that is not an identifier, a FROM that is not an image reference. Spec validation refuses these
    first; this is the second line."""

    def walk(value, key):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(k, key)
                walk(v, f"{key}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        elif isinstance(value, str) and text_problem(value):
            raise UsageError(
                f"{variant.spec_file}: {short(key, 80, quote=False)}: {text_problem(value)}; refusing to render"
            )

    for k, v in variant.as_dict().items():
        walk(v, k)
    problem = reference_problem(variant.base)
    if problem:
        raise UsageError(f"{variant.spec_file}: base: {problem}; refusing to render")
    for kind in ("args", "env"):
        for name in getattr(variant, kind):
            if not IDENT_RE.fullmatch(name):
                raise UsageError(
                    f"{variant.spec_file}: {kind}: name {short(name)} is not an identifier; refusing to render"
                )


class RepositoryLoader(jinja2.FileSystemLoader):
    """Templates/ only: a template or a partial it includes that resolves (through a link) outside the folder is
    refused before it is read, as the spec's `template` is when the spec loads."""

    def get_source(self, environment, template):
        path = TEMPLATES.joinpath(*jinja2.loaders.split_template_path(template))
        if path.is_symlink() or path.exists():
            resolved = path.resolve()
            if not resolved.is_relative_to(TEMPLATES.resolve()) or not resolved.is_file():
                raise UsageError(f"templates/{short(template, quote=False)}: leaves the repository (through a link)")
        return super().get_source(environment, template)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=RepositoryLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["basename"] = posixpath.basename
    env.filters["dq"] = dockerfile_quote
    env.filters["shquote"] = shell_quote
    return env


def render(plan: Plan) -> str:
    """Templates see the resolved spec's fields (name, base, args, env, components, pip, patches, ...) and `src`,
    the named build context of each git component."""
    v = plan.variant
    guard(v)
    text = (
        environment()
        .get_template(v.template)
        .render(
            **v.as_dict(),
            spec_file=v.spec_file,
            digest=v.digest,
            pip_secret=SECRET_PIP_CA,
            wheelhouse_image=image_ref(v),
            src={name: context_name(name) for name in git_components(v)},
        )
    )
    for number, line in enumerate(text.splitlines(), 1):  # BuildKit reads no longer line; refuse it here, not there
        if len(line.encode()) > MAX_VALUE_BYTES:
            raise UsageError(
                f"{v.spec_file}: line {number} of the rendered Dockerfile is longer than {MAX_VALUE_BYTES} bytes"
            )
    return text.rstrip("\n") + "\n"
