"""A GPU variant's build on a stand-in base: which steps this host skips, how the stand-in differs from the real
base, and the variant that is built (`build.py build --target T --stand-in-base`).

The stand-in base itself is made by toolkit/engine/stand_in_base.py; this module only decides, as a plain function
of the variant, the `--source` names and the `--compile` names:

- A step is **skipped** when it compiles native code (a `compile` record, a `make` or `cargo` step) and `--compile`
  does not name it, when it reads a git component no `--source` gives (a stand-in build fetches nothing but the
  package index's files), or when it installs from its own index a pin with no locked file (that index was
  unreachable when locking).
- A skipped component step whose distribution the closure already installs (the base's own, from the index) is
  a **difference**: the image keeps the index's release in its place. Every other difference comes from the base
  file and the stand-in's own facts.
- The gate config gains a `stand_in` section (verify/stand_in.py): a gate may fail only by naming a module or
  distribution of a skipped step (`not built here: STEP`) or of a difference (`differs from base: WHY`).

Nothing else changes: the Dockerfile is the variant's own render without the skipped steps, and its FROM line
names the real base, which the build's named context points at the stand-in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from toolkit.errors import UsageError, short
from toolkit.steps import applies, expand

SUFFIX = "-standin"  # every tag of a stand-in build ends so: it cannot be mistaken for the real image
COMPILE_KINDS = ("make", "cargo")  # kinds that always compile (a `pip` or `source` step says so by `compile`)
SOURCE_KINDS = ("source", "make", "cargo", "requirements")  # kinds whose value is a component


@dataclass(frozen=True)
class Skip:
    index: int  # the step's place in the variant's steps
    step: str  # how the output and the gates name the step: `pip flash-attn`, `source apex`
    why: str
    modules: tuple
    distributions: tuple
    paths: tuple = ()  # files it installs that a gate runs (a cargo step's binaries)
    replaced: str = ""  # the distributions the closure installs in the step's place ("" when none)

    def rule(self) -> dict:
        """What the gate runner may excuse for it (verify/stand_in.py's rule, less its `why`)."""
        return {"modules": list(self.modules), "distributions": list(self.distributions), "paths": list(self.paths)}


@dataclass(frozen=True)
class StandIn:
    skipped: tuple  # Skip, in the steps' order
    differences: tuple = ()  # lines: how the stand-in base differs from the real one (stand_in_base.py)

    def gate_rules(self) -> dict:
        """The gate config's `stand_in` section (verify/stand_in.py's shape)."""
        named = [s for s in self.skipped if s.modules or s.distributions or s.paths]  # one that names none excuses none
        return {
            "not_built": [dict(s.rule(), step=s.step, why=s.why) for s in named if not s.replaced],
            "differs": [dict(s.rule(), why=replaced_line(s)) for s in named if s.replaced],
        }

    def lines(self) -> list[str]:
        """What every stand-in build prints (and its image's labels hold): each skip, then each difference."""
        skips = [f"not built here: {s.step} ({s.why})" for s in self.skipped if not s.replaced]
        return skips + [f"differs from base: {d}" for d in (*map(replaced_line, self.replaced), *self.differences)]

    @property
    def replaced(self) -> list:
        return [s for s in self.skipped if s.replaced]


def replaced_line(skip: Skip) -> str:
    return f"{skip.replaced}: the index's release in place of {skip.step} ({skip.why})"


def step_name(step: dict, args: dict) -> str:
    """`pip flash-attn`, `source apex`, `source miles:SUBDIR`: the kind, then what it installs."""
    value = step.get("value")
    shown = ",".join(value) if isinstance(value, list) else str(value) if value is not None else ""
    shown += f":{step['subdir']}" if "subdir" in step else ""
    return f"{step['kind']} {expand(shown, args)}".strip()


def names_of(step: dict, args: dict) -> set:
    """What `--compile` may call a step: its whole name, or one name of what it installs."""
    value = step.get("value")
    items = value if isinstance(value, list) else [value] if value else []
    return {step_name(step, args), *(expand(str(i), args) for i in items)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def bare(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]


def provides(step: dict, args: dict) -> tuple[tuple, tuple]:
    """(modules, distributions) a step installs: a pip step's names (and their usual import names); a component's
    step, what its `provides` says (a component's name is not its distribution's)."""
    names = [bare(expand(n, args)) for n in step["value"]] if step["kind"] == "pip" else []
    mods = [n.replace("-", "_").lower() for n in names] + list(step.get("provides", ()))
    dists = [canonical(n) for n in names] + [canonical(m.split(".")[0]) for m in step.get("provides", ())]
    return tuple(dict.fromkeys(mods)), tuple(dict.fromkeys(dists))


def compiles(step: dict) -> bool:
    return "compile" in step or step["kind"] in COMPILE_KINDS


def skip_reason(step: dict, v, given: set, compile_names: set) -> str | None:
    """Why a stand-in build skips `step`, or None: it builds here."""
    value = step.get("value")
    if step["kind"] in SOURCE_KINDS and value in (v.components or {}) and value not in given:
        return f"git checkout {value} not fetched here; --source {value}=DIR gives it"
    if compiles(step) and not compile_names & names_of(step, v.args):
        return f"compiles native code; --compile '{step_name(step, v.args)}' builds it here"
    if step["kind"] == "pip" and step.get("extra_index"):  # a pin `--set` moves on the default index still builds
        pins = [f"{expand(n, v.args)}=={v.pip[n]}" for n in step["value"] if n in (v.pip or {})]
        missing = [p for p in pins if p not in (v.pip_files or {})]
        if missing:
            return f"no locked file for {', '.join(missing)} (its own index was unreachable when locking)"
    return None


def closure_names(v) -> set:
    """The distributions the closure step installs: those with a wheel (it installs `--only-binary :all:`)."""
    return {
        canonical(name)
        for packages in (v.closure or {}).values()
        for name, record in packages.items()
        if any(f.endswith(".whl") for f in record.get("files", {}))
    }


def plan_stand_in(v, given=(), compile_names=(), base_held=()) -> StandIn:
    """The skips of `v` on a stand-in base; `given`: the components `--source` gives; `compile_names`: the
    compiling steps to build anyway (each must name one); `base_held`: the distributions the stand-in base holds
    (toolkit/engine/stand_in_base.py: held)."""
    asked, given = set(compile_names), set(given)
    steps = [(i, step) for i, step in enumerate(v.steps) if applies(step, v.args)]
    named = set().union(*(names_of(step, v.args) for _, step in steps if compiles(step)))
    for name in sorted(asked - named):
        choices = ", ".join(sorted(step_name(s, v.args) for _, s in steps if compiles(s)))
        raise UsageError(f"--compile {short(name)}: no compiling step of {v.name} is named so ({choices})")
    installed = closure_names(v) | {canonical(n) for n in base_held}
    skipped = []
    for i, step in steps:
        why = skip_reason(step, v, given, asked)
        if why is not None:
            mods, dists = provides(step, v.args)
            paths = tuple(f"{step['to'].rstrip('/')}/{b}" for b in step.get("bins", ())) if "to" in step else ()
            # A pip step installs the closure's own pins; a component's build the closure holds from the index
            # (sglang from sglang-miles' tree) leaves the index's release in its place.
            kept = [d for d in dists if d in installed] if step["kind"] != "pip" else []
            skipped.append(Skip(i, step_name(step, v.args), why, mods, dists, paths, ", ".join(kept)))
    return StandIn(tuple(skipped))


def stand_in_variant(v, stand_in: StandIn):
    """The variant a stand-in build renders: its steps without the skipped ones, its tags ending in `-standin`, its
    gate config with the `stand_in` section."""
    skipped = {s.index for s in stand_in.skipped}
    steps = tuple(s for i, s in enumerate(v.steps) if i not in skipped)
    return replace(
        v, steps=steps, tag_suffix=v.tag_suffix + SUFFIX, gates=dict(v.gates, stand_in=stand_in.gate_rules())
    )
