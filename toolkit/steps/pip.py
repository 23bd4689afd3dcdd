"""The `pip` step kind (its contract is the class docstring)."""

from __future__ import annotations

from toolkit.errors import short
from toolkit.plan import artifacts as art
from toolkit.render.quoting import hash_option
from toolkit.spec.schema import STR_LIST, STR_MAP
from toolkit.spec.values import DEBIAN_NAME_RE
from toolkit.steps.base import (
    COMPILE,
    INDEX_URL_RE,
    Kind,
    check_compile,
    check_flags_env,
    check_prebuilt,
    check_refs,
    env_words,
    expand,
    flag_words,
    jobs_words,
    need_pin,
    no_deps_over_closure,
    prebuilt_lines,
    run,
    with_prebuilt,
    with_tools,
)


class Pip(Kind):
    """`pip: [NAME, ...]` — the named pins of the variant's `pip` table, installed together as NAME==VERSION.

    Reads: names in the `pip` table (the versions live there, once); options `flags` (no-deps, no-build-isolation,
    force-reinstall), `env` (variables for this pip run only; `${NAME}` references allowed) and `replaces_apt`
    (apt packages the wheels replace, purged first in the same step, so the loader never mixes the two);
    `prebuilt` (a wheel artifact installed instead of building the one pin from source: toolkit/plan/artifacts.py);
    `extra_index` (https URLs of vendor wheel indexes searched besides the default one, `${NAME}` references
    allowed: flashinfer publishes its cubin and JIT-cache wheels only there; the index check and the lock read them);
    `compile` (the step compiles native code: `{gib_per_job, cpus_per_job, parallel: {env, max}, record}`, one
    compiler job's peak memory and the CPUs it keeps busy, with where those figures come from; pip then runs under
    image_tools/jobs.py, which sets MAX_JOBS from the CPUs and memory of the worker running the step, or takes a
    set `args.MAX_JOBS` as the budget; a build for a platform its builder only emulates is refused).
    A `no-deps` step installs exactly the files the family's lock records (`--require-hashes`), or says in a comment
    which pin is still pending there.
    Leaves: the distributions. On a wheelhouse family pip runs offline against the wheelhouse and its constraints
    (with wheels for several platforms, the step names the packages and each platform's constraints pin them);
    elsewhere it reaches the index with the host's CA bundle mounted as a secret (never in a layer).
    May not: install anything unpinned or name a pin the table does not hold.
    """

    key = "pip"
    order = 3
    main = STR_LIST
    options = {
        "flags": STR_LIST,
        "env": STR_MAP,
        "replaces_apt": STR_LIST,
        "prebuilt": str,
        "extra_index": STR_LIST,
        "compile": COMPILE,
    }

    def check(self, step, v, where):
        args = v.get("args") or {}
        for i, name in enumerate(step["value"]):
            need_pin(name, v, where, f"pip[{i}]")
        for i, url in enumerate(step.get("extra_index", [])):
            check_refs(url, args, where, f"extra_index[{i}]")
            if not INDEX_URL_RE.fullmatch(expand(url, args)):
                raise where.error(f"extra_index[{i}]", f"an https index URL is required, got {short(url)}")
        check_flags_env(step, v, where)
        check_compile(step, v, where)
        check_prebuilt(step, v, where)
        if "prebuilt" in step:
            if len(step["value"]) != 1:
                raise where.error("prebuilt", "a prebuilt wheel replaces one pin: name exactly one")
            name = step["value"][0]
            wheel = art.file_name(v["artifacts"][step["prebuilt"]])
            if not art.is_wheel_of(wheel, expand(name, args), v["pip"][name]):
                raise where.error("prebuilt", f"{short(wheel)} is not the wheel of {name}=={v['pip'][name]}")
        for i, name in enumerate(step.get("replaces_apt", [])):
            check_refs(name, args, where, f"replaces_apt[{i}]")
            if not DEBIAN_NAME_RE.fullmatch(expand(name, args)):
                raise where.error(f"replaces_apt[{i}]", f"not a Debian package name: {short(name)}")

    def uses(self, step, v):
        return {("pip", name) for name in step["value"]}

    def view(self, step, v):
        # A wheelhouse with wheels for several platforms: one Dockerfile serves them all, so the step names the
        # packages and each platform's constraints file (its wheelhouse's constraints.txt) holds the exact pins.
        by_name = bool((v.get("wheelhouse") or {}).get("other_platforms"))
        pins = [(name, None if by_name else v["pip"][name]) for name in step["value"]]
        view = dict(step, pins=pins)
        view = no_deps_over_closure(view, v)
        if "no-deps" in view.get("flags", []) and not v.get("wheelhouse"):
            # Exactly the locked files: pip checks each against the lock's sha256s (any of the variant's platforms).
            locked = v.get("pip_files") or {}
            keys = [f"{expand(name, v.get('args') or {})}=={version}" for name, version in pins]
            missing = [k for k in keys if k not in locked]
            if missing:
                view["unhashed"] = (
                    f"not hash-checked: no locked file for {', '.join(missing)} (`build.py lock`; a pin whose index"
                    " could not be reached stays pending)"
                )
            else:
                view["hashes"] = [(k, locked[k]) for k in keys]
        return with_prebuilt(view, v, step["value"][0])

    def lines(self, step, out):
        if step.get("choice", {}).get("how", "source") != "source":
            return prebuilt_lines(step, out)
        purge = []
        if "replaces_apt" in step:
            names = " ".join(out.word(n) for n in step["replaces_apt"])
            purge = [
                f"apt-get remove -y --purge --allow-change-held-packages {names} &&",
                "rm -rf /var/lib/apt/lists/* &&",
            ]
        pins = [out.word(name + (f"=={version}" if version else "")) for name, version in step["pins"]]
        extra = "".join(f" --extra-index-url {out.word(u)}" for u in step.get("extra_index", []))
        install = f"{env_words(step, out)}{jobs_words(step, out)}pip install {out.pip_opts()}{flag_words(step)}{extra}"
        out_lines = [f"# {step['unhashed']}"] if "unhashed" in step else []
        head = [out.index_env(), *purge]
        if "hashes" in step:
            locked = " ".join(out.word(pin + "".join(hash_option(s) for s in shas)) for pin, shas in step["hashes"])
            body = [
                f"printf '%s\\n' {locked} >/tmp/pip-locked.txt &&",
                f"{install} --require-hashes -r /tmp/pip-locked.txt &&",
                "rm /tmp/pip-locked.txt",
            ]
        elif len(pins) > 2:
            body = [install, *pins]
        else:
            body = [f"{install} {' '.join(pins)}"]
        return [*out_lines, run(with_tools(out.index_mount(), step), head + body)]
