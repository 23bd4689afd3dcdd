"""Values are data, by property: random strings through every field a template renders never change the rendered
Dockerfile's structure.

The structure is what `dockerfile-parse` reads: the list of instructions (comments included), the keys of every
ENV/LABEL/ARG, the words of FROM, and the shell shape of every RUN (its operators, and how many words lie between
them). Each example gives every field a fresh random value, 10,000 examples per family. A value that no quoting
can hold (a control character, a FROM that is not an image reference, an ENV/ARG name that is not an identifier)
must be refused by `render` itself, even with spec validation bypassed as here; so must a path that a COPY or
WORKDIR instruction takes as it is (a step's `into`, a `workdir`) when it is not a plain absolute path, an
artifact URL whose path does not decode to plain segments and a plain file name (its fetch stage and the RUN line
that installs it hold the decoded name), and a `--source wheels` file name that is not a plain wheel name.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import shlex
import unicodedata
import urllib.parse

import pytest
from dockerfile_parse import DockerfileParser

from toolkit.errors import SpecError, UsageError
from toolkit.plan import artifacts
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog
from toolkit.spec.values import CONTROL_RE, IDENT_RE, check_abs_path, reference_problem

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
SHELLISH = list("\"'\\$`;&|<>(){}[]*?!~#=:,./ -_\n\t\r\x00aZ09") + ["&&", "||", "$(", "<<EOF", "\\\n", "${X}"]
SHELLISH_CLEAN = [c for c in SHELLISH if not CONTROL_RE.search(c)]
LOWER, ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
NOT_CLEAN = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # control, format, surrogate, line and paragraph separators


# Values come from a seeded `random.Random` per example, not from Hypothesis: drawing ~30 strings per example
# through Hypothesis cost five times the rendering itself, and a failure here prints the example's seed and every
# value, which is all a shrink would give.
def _length(rng: random.Random, most: int) -> int:
    return int(rng.random() ** 2 * (most + 1))  # short values often, up to `most`


def _char(rng: random.Random, clean: bool) -> str:
    while True:
        r = rng.random()
        if r < 0.5:
            c = chr(rng.randrange(0x20, 0x7F))  # printable ASCII
        elif r < 0.65:
            c = chr(rng.choice((*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, 0x85)))  # controls, breaks
        elif r < 0.85:
            c = chr(rng.randrange(0xA0, 0x800))
        else:
            c = chr(rng.randrange(0x800, 0x110000))
        category = unicodedata.category(c)
        if category != "Cs" and not (clean and category in NOT_CLEAN):
            return c


def any_value(rng: random.Random, clean: bool = False) -> str:
    """Arbitrary text (control characters included unless clean), or shell metacharacters strung together."""
    if rng.random() < 0.5:
        return "".join(_char(rng, clean) for _ in range(_length(rng, 40)))
    return "".join(rng.choice(SHELLISH_CLEAN if clean else SHELLISH) for _ in range(_length(rng, 12)))


def reference(rng: random.Random) -> str:
    """A valid image reference, so that a clean example renders past FROM."""
    path = "/".join("".join(rng.choice(LOWER) for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(1, 3)))
    return f"{path}:{rng.choice(ALNUM + '_')}" + "".join(rng.choice(ALNUM + "_.-") for _ in range(_length(rng, 20)))


def abs_path(rng: random.Random) -> str:
    """A valid path in the image, so that a clean example renders past COPY and WORKDIR."""
    return "/" + "/".join(
        "".join(rng.choice(ALNUM + "._-") for _ in range(rng.randint(1, 8))).strip(".") or "a"
        for _ in range(rng.randint(1, 3))
    )


def identifier(rng: random.Random) -> str:
    """A valid ENV/ARG name, so that a clean example renders past it."""
    return rng.choice(ALNUM[:52] + "_") + "".join(rng.choice(ALNUM + "_") for _ in range(_length(rng, 12)))


def artifact_url(rng: random.Random, clean: bool) -> str:
    """An artifact URL ending in random text (in a clean example mostly a plain file name), percent-encoded half
    the time (the decoded name is what renders)."""
    text = plain_name(rng) if clean and rng.random() < 0.9 else any_value(rng, clean) or "x"
    if rng.random() < 0.5:
        text = urllib.parse.quote(text, safe="" if rng.random() < 0.5 else "/")
    return f"https://example.com/files/{text}"


def wheel_file(rng: random.Random, clean: bool) -> str:
    """A `--source wheels` file name of the seeded pin (random tags), or random text."""
    if rng.random() < 0.1:
        return any_value(rng, clean)
    tag = plain_name(rng).replace("-", "_") if clean and rng.random() < 0.9 else any_value(rng, clean) or "py3"
    return f"{WHEEL_DIST}-{WHEEL_VERSION}-{tag}-none-any.whl"


def plain_name(rng: random.Random) -> str:
    return rng.choice(ALNUM) + "".join(rng.choice(ALNUM + "._+-") for _ in range(_length(rng, 30)))


def example(rng: random.Random, fields) -> dict:
    """One example: every field a fresh value; half the examples "dirty" (anything: render must refuse what no
    quoting holds), half "clean" (valid FROM and names, no control characters: it must render)."""
    if rng.random() < 0.5:
        values = {f: any_value(rng) for f in fields}
        values.update({"artifact url": artifact_url(rng, False), "wheel file": wheel_file(rng, False)})
        return values
    return {
        f: artifact_url(rng, True)
        if f == "artifact url"
        else wheel_file(rng, True)
        if f == "wheel file"
        else reference(rng)
        if f == "base"
        else identifier(rng)
        if f in ("args name", "env name")
        else abs_path(rng)
        if f.endswith((".into.None", ".value.None"))  # a step's `into`, a `workdir`
        else any_value(rng, clean=True)
        for f in fields
    }


OPERATORS = set("();<>|&")


WHEEL_DIST, WHEEL_VERSION = "torch", "2.13.0"  # the pin a seeded `prebuilt` step replaces
SHA = "a" * 64


def seeded(family: str):
    """The family's default variant with one ENV, one ARG, one patch, a file artifact installed at a path and a
    prebuilt wheel for one pin (given by `--source wheels`), so every partial renders something. Its wheelhouse is
    one platform's: then pip versions are rendered (with several, each platform's constraints file holds them, and
    a version the file does not pin is refused: tests/unit/test_nothing_dropped.py)."""
    v = load_catalog().resolve(family)
    steps = v.steps if any(s["kind"] == "patches" for s in v.steps) else (*v.steps, {"kind": "patches"})
    wheel = f"https://example.com/w/{WHEEL_DIST}-{WHEEL_VERSION}-py3-none-any.whl"
    return dataclasses.replace(
        v,
        wheelhouse={k: w for k, w in v.wheelhouse.items() if k != "other_platforms"},
        env={**v.env, "FUZZ_ENV": "x"},
        args={**v.args, "FUZZ_ARG": "x"},
        pip={**v.pip, WHEEL_DIST: WHEEL_VERSION},
        patches=({"file": "images/smoke.constraints.txt", "tree": "/opt/tree", "ref": "0" * 40},),
        artifacts={
            **v.artifacts,
            "fuzz_file": {"url": "https://example.com/files/notes.bin", "sha256": SHA, "size": 1},
            "fuzz_wheel": {"url": wheel, "sha256": SHA, "size": 1},
        },
        pip_files={},  # the lock's files are the spec's own pins: fuzzed pins have none (no-deps steps: one shape)
        steps=(
            *steps,
            {"kind": "apt", "value": ["x"], "why": "x"},
            {"kind": "artifact", "value": "fuzz_file", "to": "/opt/fuzz.bin"},
            {"kind": "pip", "value": [WHEEL_DIST], "prebuilt": "fuzz_wheel"},
        ),
    )


def with_wheels(plan, wheels):
    return dataclasses.replace(plan, wheels=tuple(wheels))


# The values a step holds as data (text that is quoted into its instructions); names of table entries, flags and
# the kind are references checked against the spec, not free text.
STEP_VALUES = {"why", "env", "vars", "into", "package", "binaries", "to", "replaces_apt", "drop_system"}
FREE_MAIN = {"build_env", "apt", "workdir"}


def step_leaves(steps) -> list:
    """(index, key, sub) of every free text value in the steps: sub is a mapping key, a list index or None."""
    out = []
    for i, step in enumerate(steps):
        for key, value in step.items():
            if key not in STEP_VALUES and not (key == "value" and step["kind"] in FREE_MAIN):
                continue
            subs = list(value) if isinstance(value, dict) else range(len(value)) if isinstance(value, list) else [None]
            out += [(i, key, sub) for sub in subs]
    return out


def field_setters(v) -> dict:
    """field id -> function(variant, value) -> variant with that field set to value."""

    def put(attr, key):
        return lambda var, x: dataclasses.replace(var, **{attr: {**getattr(var, attr), key: x}})

    def rename(attr, old):  # the entry keeps its place and value; a name already taken is left alone
        def set_name(var, x):
            items = getattr(var, attr)
            if x in items:
                return var
            return dataclasses.replace(var, **{attr: {(x if k == old else k): val for k, val in items.items()}})

        return set_name

    def comp(name, part):
        return lambda var, x: dataclasses.replace(
            var, components={**var.components, name: {**var.components[name], part: x}}
        )

    def patch(part):
        return lambda var, x: dataclasses.replace(var, patches=({**var.patches[0], part: x},))

    setters = {
        f: (lambda f: lambda var, x: dataclasses.replace(var, **{f: x}))(f)
        for f in ("base", "python", "name", "repository")
    }
    # An arg a step's `when` names decides which steps a variant has (by design): it is not free text here.
    decides = {name for s in v.steps for name in s.get("when", {})}
    setters.update({f"args.{k}": put("args", k) for k in v.args if k not in decides})
    setters.update({f"env.{k}": put("env", k) for k in v.env})
    setters.update({f"pip.{k}": put("pip", k) for k in v.pip})
    for name, c in v.components.items():
        for part in ("git", "ref", "version"):
            if part in c:
                setters[f"components.{name}.{part}"] = comp(name, part)
    setters.update({f"patch.{part}": patch(part) for part in ("file", "tree", "ref")})

    def step_value(i, key, sub):
        def set_value(var, x):
            steps = [dict(s) for s in var.steps]
            old = steps[i][key]
            if sub is None:
                steps[i][key] = x
            elif isinstance(old, dict):
                steps[i][key] = {**old, sub: x}
            else:
                steps[i][key] = [x if j == sub else y for j, y in enumerate(old)]
            return dataclasses.replace(var, steps=tuple(steps))

        return set_value

    setters.update({f"steps[{i}].{key}.{sub}": step_value(i, key, sub) for i, key, sub in step_leaves(v.steps)})
    setters["args name"], setters["env name"] = rename("args", "FUZZ_ARG"), rename("env", "FUZZ_ENV")

    def url(var, x):
        return dataclasses.replace(
            var, artifacts={**var.artifacts, "fuzz_file": {**var.artifacts["fuzz_file"], "url": x}}
        )

    setters["artifact url"] = url
    setters["wheel file"] = lambda var, x: var  # a plan's, not the variant's: test_random_values... sets it
    return setters


def shell_shape(cmd: str) -> tuple:
    """A RUN line as bash reads it: unquoted operators, "w" for each word, "$(" ... ")" around a command
    substitution (parsed afresh inside, as bash does, even within double quotes), "`" for a backquote;
    ("unbalanced",) when a quote or a substitution never closes."""
    shape, word, state, outer, i = [], False, None, [], 0
    while i < len(cmd):
        c = cmd[i]
        if state == "'":
            state = None if c == "'" else state
        elif c == "\\":
            i, word = i + 1, True
        elif cmd.startswith("$(", i):
            shape.append("$(")
            outer.append((state, word))
            state, word, i = None, False, i + 2
            continue
        elif c == ")" and state is None and outer:
            if word:
                shape.append("w")
            shape.append(")")
            state, word = outer.pop()
        elif c == "`":
            shape.append(c)
            word = True
        elif state == '"':
            state = None if c == '"' else state
        elif c in "'\"":
            state, word = c, True
        elif c in OPERATORS or c.isspace():
            if word:
                shape.append("w")
            word, op = False, ""
            while i < len(cmd) and cmd[i] in OPERATORS:
                op, i = op + cmd[i], i + 1
            if op:
                shape.append(op)
                continue
        else:
            word = True
        i += 1
    if word:
        shape.append("w")
    return ("unbalanced",) if state or outer else tuple(shape)


def structure(text: str) -> list:
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    shape = []
    for ins in parser.structure:
        kind, value = ins["instruction"], ins["value"]
        if kind == "RUN":
            detail = shell_shape(value)
        elif kind in ("ENV", "LABEL", "ARG"):  # how many KEY=VALUE pairs
            try:
                detail = len(shlex.split(value))
            except ValueError as e:  # an unbalanced quote: a value broke out of its word
                detail = ("unparsable", str(e))
        elif kind == "ADD":  # its flags, and how many words its exec form (a JSON list) holds
            flags, _, words = value.partition(" [")
            try:
                detail = (flags.split("=")[0], len(json.loads("[" + words)))
            except ValueError as e:
                detail = ("unparsable", str(e))
        elif kind in ("FROM", "COPY", "WORKDIR"):
            detail = len(value.split())
        elif kind == "COMMENT":
            detail = None  # a comment may hold a value (the variant name, a step's `why`): it stays comment lines
            if shape and shape[-1] == (kind, detail):
                continue  # a `why` wraps at word boundaries, so its line count varies with its text
        else:
            detail = value
        shape.append((kind, detail))
    return shape


def abs_path_ok(path: str) -> bool:
    try:
        check_abs_path(path, "fuzz", "path")
    except SpecError:
        return False
    return True


def must_refuse(v, wheel: str) -> bool:
    """What `render` has to refuse whatever the spec said: nothing quoting can keep on one line or in one word, an
    artifact file name that is not plain once decoded, a wheel file name that is not the seeded pin's plain one."""
    strings = [
        v.base,
        v.python,
        v.name,
        v.repository,
        *v.args,
        *v.args.values(),
        *v.env,
        *v.env.values(),
        *v.pip,
        *v.pip.values(),
        *(str(s[k][sub] if sub is not None else s[k]) for i, k, sub in step_leaves(v.steps) for s in [v.steps[i]]),
        *(y for c in v.components.values() for x in c.values() for y in (x if isinstance(x, list) else [x])),
        *(str(x) for p in v.patches for x in p.values()),
    ]
    paths = [s.get("into", s["value"] if s["kind"] == "workdir" else "/") for s in v.steps]
    return (
        artifacts.url_problem(v.artifacts["fuzz_file"]["url"]) is not None
        or artifacts.file_name_problem(wheel) is not None
        or artifacts.wheel_dist(wheel) != WHEEL_DIST
        or any(CONTROL_RE.search(s) for s in strings)
        or not all(abs_path_ok(p) for p in paths)
        or reference_problem(v.base) is not None
        or not all(IDENT_RE.fullmatch(k) for k in (*v.args, *v.env))
    )


@pytest.mark.parametrize("family", ["smoke", "miles-cpu", "rocm", "cuda"])
def test_random_values_never_change_the_instruction_list(family):
    base = seeded(family)
    wheel = f"{WHEEL_DIST}-{WHEEL_VERSION}-py3-none-any.whl"
    expected = structure(render(with_wheels(make_plan(base, revision="fuzz"), [wheel])))
    setters = field_setters(base)
    counts = {"rendered": 0, "refused": 0}
    for seed in range(EXAMPLES):
        values = example(random.Random(f"{family}:{seed}"), setters)
        v = base
        for field in setters:  # names last: a value setter never re-adds a renamed entry
            v = setters[field](v, values[field])
        wheel = values["wheel file"]
        if must_refuse(v, wheel):
            with pytest.raises(UsageError):
                render(with_wheels(make_plan(v, revision="fuzz"), [wheel]))
            counts["refused"] += 1
            continue
        text = render(with_wheels(make_plan(v, revision="fuzz"), [wheel]))
        assert structure(text) == expected, (f"seed {family}:{seed}", values)
        name = urllib.parse.unquote(values["artifact url"].rsplit("/", 1)[-1])
        assert f'"/{name}"]' in text and f"/tmp/artifacts/fuzz_file/{name}" in text  # decoded, in its folder
        assert f"/tmp/prebuilt-wheels/{wheel}" in text
        counts["rendered"] += 1
    assert counts["rendered"] >= EXAMPLES // 4, counts  # the quoting itself was exercised, not only refusals
    assert counts["refused"] >= EXAMPLES // 4, counts  # and so was render's own refusal
