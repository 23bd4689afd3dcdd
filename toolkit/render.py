"""Render a plan's Dockerfile from its Jinja2 template. Pure: the same plan gives byte-identical text."""

from __future__ import annotations

import posixpath

import jinja2

from toolkit.plan import SECRET_PIP_CA, Plan
from toolkit.sources import context_name, git_components
from toolkit.spec import ROOT
from toolkit.wheelhouse import image_ref

TEMPLATES = ROOT / "templates"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["basename"] = posixpath.basename
    return env


def render(plan: Plan) -> str:
    """Templates see the resolved spec's fields (name, base, args, env, components, pip, patches, ...) and `src`,
    the named build context of each git component."""
    v = plan.variant
    text = environment().get_template(v.template).render(
        **v.as_dict(), spec_file=v.spec_file, digest=v.digest, pip_secret=SECRET_PIP_CA, wheelhouse_image=image_ref(v),
        src={name: context_name(name) for name in git_components(v)},
    )
    return text.rstrip("\n") + "\n"
