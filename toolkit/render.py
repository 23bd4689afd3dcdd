"""Render a plan's Dockerfile from its Jinja2 template. Pure: the same plan gives byte-identical text.

Values are data: templates quote them (`dq` for ENV/LABEL/ARG values, `shquote` for words of RUN lines, `jsonwords`
for the exec form of ADD), and every quoting filter passes its value through `plain` first, in its final form (a
file name decoded from a URL, a wheel's name): a value no quoting can hold on one line (a control character) is
refused there, whatever validation it slipped past, as is a name that cannot be quoted (an ENV/ARG name).
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import shlex

import jinja2

from toolkit import artifacts
from toolkit.errors import SpecError, UsageError, short
from toolkit.plan import SECRET_PIP_CA, Plan
from toolkit.sources import context_name, git_components
from toolkit.spec import ROOT
from toolkit.spec_values import IDENT_RE, MAX_VALUE_BYTES, check_abs_path, reference_problem, text_problem
from toolkit.steps import ARG_REF_RE, views
from toolkit.wheelhouse import image_ref

TEMPLATES = ROOT / "templates"


def plain(value) -> str:
    """`value` as text that can stand on one Dockerfile line, or UsageError: every quoting filter starts here."""
    text = str(value)
    problem = text_problem(text)
    if problem:
        raise UsageError(f"a value for the Dockerfile: {problem}; refusing to render")
    return text


def dockerfile_quote(value) -> str:
    """A double-quoted Dockerfile word (ENV, LABEL, ARG values): `\\`, `"` and `$` escaped, so the value is taken
    literally, with no variable expansion and no way to end the word or the instruction."""
    text = plain(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{text}"'


def shell_quote(value) -> str:
    """One shell word for a RUN line (bash): the value is an argument, never shell syntax."""
    return shlex.quote(plain(value))


def json_words(values) -> str:
    """The exec form of an instruction (`ADD ["src", "dest"]`): a JSON list of plain words."""
    return json.dumps([plain(v) for v in values])


def _pieces(value, args) -> list:
    """`value` split into literal text and `${NAME}` references to declared build args (str, or ("arg", NAME))."""
    out, pos, text = [], 0, plain(value)
    for m in ARG_REF_RE.finditer(text):
        if m.group(1) in args:
            out += [text[pos : m.start()], ("arg", m.group(1))]
            pos = m.end()
    return [*out, text[pos:]]


@jinja2.pass_context
def shell_word(ctx, value) -> str:
    """One shell word in which each `${NAME}` of a declared build arg is expanded by the shell (as `"${NAME}"`)
    and every other character is literal."""
    parts = [
        f'"${{{p[1]}}}"' if isinstance(p, tuple) else (shlex.quote(p) if p else "") for p in _pieces(value, ctx["args"])
    ]
    word = "".join(parts)
    return word or "''"


@jinja2.pass_context
def dockerfile_word(ctx, value) -> str:
    """A double-quoted Dockerfile word (ENV values) in which each `${NAME}` of a declared build arg is expanded by
    the Dockerfile and every other character is literal (`dq`'s escaping)."""
    parts = [f"${{{p[1]}}}" if isinstance(p, tuple) else dockerfile_quote(p)[1:-1] for p in _pieces(value, ctx["args"])]
    return '"' + "".join(parts) + '"'


def shell_glob(value) -> str:
    """A path pattern as one shell word: `*` stays a glob, every other character is quoted."""
    return "*".join(shlex.quote(part) if part else "" for part in plain(value).split("*"))


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
    for i, step in enumerate(variant.steps):  # paths a Dockerfile instruction (COPY, WORKDIR) takes unquoted
        path = step.get("into", step["value"] if step["kind"] == "workdir" else None)
        if path is not None:
            try:
                check_abs_path(path, variant.spec_file, f"steps[{i}]")
            except SpecError as e:
                raise UsageError(f"{e}; refusing to render") from None
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
    """Templates/ only: a template or a partial it includes that resolves (through a link) outside the folder, or a
    `templates/` folder that is itself a link out of the repository, is refused before it is read, as the spec's
    `template` is when the spec loads."""

    def get_source(self, environment, template):
        path = TEMPLATES.joinpath(*jinja2.loaders.split_template_path(template))
        if path.is_symlink() or path.exists():
            resolved, root = path.resolve(), TEMPLATES.resolve()
            if (
                not (resolved.is_relative_to(root) and root.is_relative_to(TEMPLATES.parent.resolve()))
                or not resolved.is_file()
            ):
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
        extensions=["jinja2.ext.do"],
    )
    env.filters["basename"] = posixpath.basename
    env.filters["dq"] = dockerfile_quote
    env.filters["shquote"] = shell_quote
    env.filters["shword"] = shell_word
    env.filters["hashopt"] = lambda sha: f" --hash=sha256:{sha}" if re.fullmatch(r"[0-9a-f]{64}", sha) else _bad(sha)
    env.filters["dqword"] = dockerfile_word
    env.filters["shglob"] = shell_glob
    env.filters["jsonwords"] = json_words
    env.filters["artifact_stage"] = artifacts.stage_name
    return env


def _bad(value):
    raise ValueError(f"not a sha256 hex: {value!r}")


def context(plan: Plan) -> dict:
    """What the templates see: the resolved spec's fields (name, base, args, env, components, pip, patches, ...),
    `steps` as each step kind resolves them (toolkit/steps/), `src`, the named build context of each git
    component, and the fetch stage of each artifact a step reads (toolkit/artifacts.py)."""
    v = plan.variant
    data = v.as_dict()
    data["steps"] = views(v, plan.wheels)
    return dict(
        data,
        spec_file=v.spec_file,
        digest=v.digest,
        pip_secret=SECRET_PIP_CA,
        wheelhouse_image=image_ref(v),
        src={name: context_name(name) for name in git_components(v)},
        artifact_stages=artifacts.stages(data["steps"], v.artifacts),
        artifact_dir=artifacts.MOUNT_DIR,
        wheels_context=context_name(artifacts.WHEELS),
        wheels_dir=artifacts.WHEELS_DIR,
    )


def render(plan: Plan) -> str:
    """The family template rendered with context(plan): pure, byte-deterministic."""
    v = plan.variant
    guard(v)
    text = environment().get_template(v.template).render(**context(plan))
    for number, line in enumerate(text.splitlines(), 1):  # BuildKit reads no longer line; refuse it here, not there
        if len(line.encode()) > MAX_VALUE_BYTES:
            raise UsageError(
                f"{v.spec_file}: line {number} of the rendered Dockerfile is longer than {MAX_VALUE_BYTES} bytes"
            )
    return text.rstrip("\n") + "\n"
