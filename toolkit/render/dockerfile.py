"""Render a plan's Dockerfile from its Jinja2 template. Pure: the same plan gives byte-identical text.

Values are data: templates quote them with the filters of toolkit/render/quoting.py (`dq`, `shquote`, `shword`,
`dqword`, `shglob`, `jsonwords`); each step's lines come quoted from its kind (toolkit/steps/). A name that cannot be
quoted (an ENV/ARG name) is refused by `guard`."""

from __future__ import annotations

import functools
import posixpath
import re

import jinja2

from toolkit.errors import SpecError, UsageError, short
from toolkit.gates.report import NONCE_ARG, REPORT_PATH
from toolkit.plan import artifacts
from toolkit.plan.build_plan import SECRET_PIP_CA, Plan
from toolkit.plan.sources import context_name, git_components
from toolkit.plan.wheelhouse import image_ref
from toolkit.render.quoting import dockerfile_quote, dockerfile_word, json_words, shell_glob, shell_quote, shell_word
from toolkit.spec.catalog import ROOT
from toolkit.spec.values import IDENT_RE, MAX_VALUE_BYTES, check_abs_path, reference_problem, text_problem
from toolkit.steps import KINDS, Out, views

TEMPLATES = ROOT / "templates"
BRIDGE_VERSION_FILE = ROOT / "bridge" / "src" / "sglang_attn_bridge" / "_version.py"
BRIDGE_VERSION_RE = re.compile(r'^__version__ = "([0-9][0-9A-Za-z.+-]*)"$', re.M)


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
    env.filters["dirname_of"] = posixpath.dirname
    env.filters["dq"] = dockerfile_quote
    env.filters["shquote"] = shell_quote
    env.filters["shword"] = jinja2.pass_context(lambda ctx, value: shell_word(value, ctx["args"]))
    env.filters["dqword"] = jinja2.pass_context(lambda ctx, value: dockerfile_word(value, ctx["args"]))
    env.filters["shglob"] = shell_glob
    env.filters["jsonwords"] = json_words
    env.filters["artifact_stage"] = artifacts.stage_name
    return env


def context(plan: Plan) -> dict:
    """What the templates see: the resolved spec's fields (name, base, args, env, components, pip, patches, ...),
    `steps` as each step kind resolves them (toolkit/steps/), `src`, the named build context of each git
    component, and the fetch stage of each artifact a step reads (toolkit/plan/artifacts.py)."""
    v = plan.variant
    data = v.as_dict()
    data["steps"] = views(v, plan.wheels)
    out = Out(
        args=v.args,
        python=v.python,
        pip_secret=SECRET_PIP_CA,
        wheelhouse_image=image_ref(v),
        src={name: context_name(name) for name in git_components(v)},
        artifact_dir=artifacts.MOUNT_DIR,
        wheels_context=context_name(artifacts.WHEELS),
        wheels_dir=artifacts.WHEELS_DIR,
    )
    data["steps"] = [dict(step, lines=KINDS[step["kind"]].lines(step, out)) for step in data["steps"]]
    return dict(
        data,
        spec_file=v.spec_file,
        digest=v.digest,
        pip_secret=SECRET_PIP_CA,
        wheelhouse_image=image_ref(v),
        src={name: context_name(name) for name in git_components(v)},
        artifact_stages=artifacts.stages(data["steps"], v.artifacts),
        bridge_version=bridge_version(),
        gate_report=REPORT_PATH,
        nonce_arg=NONCE_ARG,
        artifact_dir=artifacts.MOUNT_DIR,
        wheels_context=context_name(artifacts.WHEELS),
        wheels_dir=artifacts.WHEELS_DIR,
    )


def bridge_version() -> str:
    """The bridge's version, as its distribution's metadata will say it once installed (the bridge install step
    checks that the image's Python reports exactly this)."""
    found = BRIDGE_VERSION_RE.search(BRIDGE_VERSION_FILE.read_text())
    if found is None:
        raise UsageError(f'{BRIDGE_VERSION_FILE.relative_to(ROOT)}: no plain __version__ = "X.Y.Z" line')
    return found.group(1)


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
