"""The `source` step kind (its contract is the class docstring)."""

from __future__ import annotations

import re

from toolkit.errors import short
from toolkit.spec.schema import STR_LIST, STR_MAP
from toolkit.spec.values import EXTRAS_RE, check_abs_path, check_rel_path
from toolkit.steps.base import (
    COMPILE,
    MANIFEST_RE,
    REQ_TEXT_RE,
    TOOLS_MOUNT,
    Kind,
    check_compile,
    check_flags_env,
    check_prebuilt,
    env_words,
    flag_words,
    jobs_words,
    need_component,
    no_deps_over_closure,
    patch_line,
    prebuilt_lines,
    run,
    with_prebuilt,
    with_tools,
)


class Source(Kind):
    """`source: COMPONENT` — pip installs a git component's tree (the pinned commit, or `--source NAME=PATH`).

    Reads: the component (its `subdir`, or the step's, is the package's folder in the tree); options `flags`,
    `env` and `compile` as `pip`; `extras` (the package's extras, comma-separated); `into` (a path: the tree is
    copied there with its `.git`, a checkout at the pinned commit, and stays in the image; the component's own
    patches are applied right after the copy); `replace` (remove what the base image has at `into` first);
    `editable` (install `into` in editable mode; needs `into`); `version` (the PEP 440 version to build the tree
    as, for a tree whose version would come from git tags it does not carry);
    `install: false` (with `into`: copy the tree in, install nothing); `prebuilt` (without `into`: a wheel artifact
    installed instead of the build, toolkit/plan/artifacts.py);
    `pyproject` (another manifest of the package's folder that becomes its `pyproject.toml` before the install, e.g.
    sglang's `pyproject_other.toml` for ROCm) and `pyproject_replace` (`{OLD: NEW}` literal rewrites of that
    manifest's requirement text, each of which must match: image_tools/pyproject.py), so the installed metadata is
    the platform's own.
    Leaves: the installed package; with `into`, the tree at that path. Without `into` the tree is bind-mounted for
    this step only and nothing of it but the install remains.
    May not: fetch the source itself (BuildKit fetches the named context `src-COMPONENT`).
    """

    key = "source"
    order = 6
    main = str
    options = {
        "flags": STR_LIST,
        "env": STR_MAP,
        "subdir": str,
        "extras": str,
        "into": str,
        "replace": bool,
        "editable": bool,
        "version": str,
        "install": bool,
        "prebuilt": str,
        "pyproject": str,
        "pyproject_replace": STR_MAP,
        "compile": COMPILE,
    }

    def check(self, step, v, where):
        need_component(step["value"], v, where, "source")
        check_flags_env(step, v, where)
        check_compile(step, v, where)
        check_prebuilt(step, v, where)
        if "prebuilt" in step and "into" in step:
            raise where.error("prebuilt", "a tree that stays in the image (`into`) has no prebuilt wheel")
        if "into" in step:
            check_abs_path(step["into"], where.file, f"{where.key}.into")
        if step.get("install") is False and "into" not in step:
            raise where.error("install", "`install: false` needs `into` (the tree is then only copied in)")
        for option in ("editable", "replace"):
            if step.get(option) and "into" not in step:
                raise where.error(option, f"`{option}` needs `into` (the tree must stay in the image)")
        if "subdir" in step:
            check_rel_path(step["subdir"], where.file, f"{where.key}.subdir")
        if "extras" in step and not EXTRAS_RE.fullmatch(step["extras"]):
            raise where.error("extras", f"extras are comma-separated names, got {short(step['extras'])}")
        if ("pyproject" in step or "pyproject_replace" in step) and "into" not in step:
            raise where.error("pyproject", "a manifest is rewritten in a tree that stays in the image: needs `into`")
        if "pyproject" in step and not MANIFEST_RE.fullmatch(step["pyproject"]):
            raise where.error("pyproject", f"a .toml file name in the package's folder, got {short(step['pyproject'])}")
        for old, new in step.get("pyproject_replace", {}).items():
            for text in (old, new):
                if not REQ_TEXT_RE.fullmatch(text):
                    key = f"pyproject_replace.{short(old, 40, quote=False)}"
                    raise where.error(key, f"not requirement text: {short(text)}")
        if "version" in step and not re.fullmatch(r"[0-9]+(\.[0-9]+)*([a-z0-9.+]*)", step["version"]):
            raise where.error("version", f"a PEP 440 version is required, got {short(step['version'])}")

    def uses(self, step, v):
        return {("components", step["value"])}

    def view(self, step, v):
        comp = v["components"][step["value"]]
        name = step["value"]
        patches = [p for p in v.get("patches") or () if p.get("component") == name]
        view = dict(step, name=name, subdir=step.get("subdir", comp.get("subdir", "")), patches=patches)
        return with_prebuilt(no_deps_over_closure(view, v), v, name)

    def lines(self, step, out):
        if step.get("choice", {}).get("how", "source") != "source":
            return prebuilt_lines(step, out)
        sub = "/" + step["subdir"] if step["subdir"] else ""
        tree = step.get("into", "/tmp/src/" + step["name"])
        package = tree + sub + (f"[{step['extras']}]" if "extras" in step else "")
        version = f"SETUPTOOLS_SCM_PRETEND_VERSION={out.word(step['version'])} " if "version" in step else ""
        mode = " -e " if step.get("editable") else " "
        install = (
            f"{version}{env_words(step, out)}{jobs_words(step, out)}pip install {out.pip_opts()}{flag_words(step)}"
            f"{mode}{out.word(package)}"
        )
        if "into" not in step:
            mounts = f"{out.source_mount(step['name'], tree)} {out.index_mount()}"
            return [run(with_tools(mounts, step), [out.index_env(), install])]
        into = out.word(step["into"])
        result = [f"RUN rm -rf {into}"] if step.get("replace") else []
        result.append(f"COPY --from={out.src[step['name']]} / {into}")
        result += [patch_line(p, out) for p in step["patches"]]
        if step.get("install", True) is False:
            return [*result, ""]  # the copy alone ends with a blank line, as it always rendered
        if "pyproject" in step or "pyproject_replace" in step:
            rewrite = f" --use {out.word(step['pyproject'])}" if "pyproject" in step else ""
            for old, new in sorted(step.get("pyproject_replace", {}).items()):
                rewrite += f" --replace {out.word(old)} {out.word(new)}"
            tool = f"{out.word(out.python)} /tmp/tools/pyproject.py {out.word(step['into'] + sub)}{rewrite} &&"
            mounts = f"{TOOLS_MOUNT} {out.index_mount()}"
            result.append(run(mounts, [out.index_env(), tool, install]))
        else:
            result.append(run(with_tools(out.index_mount(), step), [out.index_env(), install]))
        return result
