"""Render a plan's Dockerfile from its Jinja2 template. Pure: the same plan gives byte-identical text."""

from __future__ import annotations

import posixpath

import jinja2

from toolkit.plan import SECRET_PIP_CA, Plan
from toolkit.spec import ROOT

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
    v = plan.variant
    text = environment().get_template(v.template).render(
        name=v.name,
        family=v.family,
        spec_file=v.spec_file,
        digest=v.digest,
        base=v.base,
        python=v.python,
        args=v.args,
        env=v.env,
        components=v.components,
        pip=v.pip,
        patches=v.patches,
        repository=v.repository,
        pip_secret=SECRET_PIP_CA,
    )
    return text.rstrip("\n") + "\n"
