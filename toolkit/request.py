"""One build request: the command line's choices as a frozen value, and the one preparation every build command runs.

`prepare` takes a request through the flow once, in one order, for `build` and `bake` alike: spec, `--ref` and
`--source`, plan (`--set`, `--tag`, `--secret`), the refusals that need no engine (zero-context hunks, platforms
without wheels, bad tags and cache references), render, stage; only then the engine (its ping, buildx, the
builder and what it can do, this machine's images). So a `--source` that cannot be staged is exit 2 on any
machine, whatever the command. What comes back is what the engine needs: one `Invocation` per target
(toolkit/engine/invocation.py), the builder and the engine's client.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.engine import builders, local_images, registry
from toolkit.engine import docker_engine as engine
from toolkit.engine.invocation import Invocation
from toolkit.errors import UsageError, short
from toolkit.gates.verify_image import check_build_gates
from toolkit.plan.build_plan import Plan, host_pip_ca, make_plan, parse_secret
from toolkit.plan.sources import overrides_for, refs_for
from toolkit.render.context import Context, kept, stage
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog
from toolkit.spec.values import TAG_RE, moving_tag_problem, reference_problem


@dataclass(frozen=True)
class BuildRequest:
    """What `build` or `bake` was asked, made once from argparse's namespace; every later step reads only this."""

    command: str  # "build" (runs the build here) or "bake" (writes the bake file that names it)
    targets: tuple
    sources: tuple = ()  # `--source NAME=PATH`
    refs: tuple = ()  # `--ref NAME=COMMIT`
    sets: tuple = ()  # `--set KEY=VALUE`
    secrets: tuple = ()  # `--secret id=NAME,src=FILE`, as given
    tag: str | None = None
    registry: str | None = None
    builder: str | None = None
    cache: str | None = None
    cache_from: str | None = None
    push: bool = False
    no_cache: bool = False
    progress: str = "auto"
    verbose: bool = False  # the gate step's summary also lists every allowed pip-check line, with its rule
    skip_existing: bool = False
    image_tag: str | None = None
    custom_tag: str | None = None
    allow_emulation: bool = False  # compile kernels even for a platform the builder only emulates
    stand_in: bool = False  # a GPU variant on a stand-in base made here (toolkit/plan/stand_in.py)
    compile: tuple = ()  # `--compile STEP`: compiling steps a stand-in build builds anyway

    @classmethod
    def from_args(cls, args) -> BuildRequest:
        targets = args.target if isinstance(args.target, list) else [args.target]
        return cls(
            command=args.command,
            targets=tuple(targets),
            sources=tuple(args.source),
            refs=tuple(args.ref),
            sets=tuple(getattr(args, "set", ())),
            secrets=tuple(getattr(args, "secret", ())),
            tag=getattr(args, "tag", None),
            registry=args.registry,
            builder=args.builder,
            cache=args.cache,
            cache_from=args.cache_from,
            # A bake file's builder pushes (`docker buildx bake --push`): what it cannot do is refused now.
            push=getattr(args, "push", True),
            no_cache=getattr(args, "no_cache", False),
            progress=getattr(args, "progress", "auto"),
            verbose=getattr(args, "verbose", False),
            skip_existing=getattr(args, "skip_existing", False),
            image_tag=getattr(args, "image_tag", None),
            custom_tag=getattr(args, "custom_tag", None),
            allow_emulation=getattr(args, "allow_emulation", False),
            stand_in=getattr(args, "stand_in_base", False),
            compile=tuple(getattr(args, "compile", ())),
        )

    @property
    def runs(self) -> bool:
        """The build runs here: the engine is always asked, and the default engine is the builder."""
        return self.command == "build"


@dataclass(frozen=True)
class Target:
    """One prepared target: its plan, its staged context and the build the engine runs (or the bake file names)."""

    plan: Plan
    ctx: Context
    invocation: Invocation


@dataclass(frozen=True)
class Prepared:
    targets: tuple  # Target, in the order asked for
    builder: builders.Builder | None  # None: a bake file for whichever builder runs it
    client: object | None  # this machine's engine (None: nothing needed one)


def prepare(request: BuildRequest, scope, log=print) -> Prepared:
    """Everything before the build itself, in the module docstring's order; staging joins `scope`."""
    check_cache(request)
    catalog = load_catalog()
    variants = list({v.name: v for v in map(catalog.resolve, request.targets)}.values())
    if request.runs:  # one target takes every item: naming what it lacks is an error about it
        sources = {v.name: list(request.sources) for v in variants}
        refs = {v.name: list(request.refs) for v in variants}
    else:  # each target takes the items naming its components
        sources, refs = overrides_for(variants, request.sources), refs_for(variants, request.refs)
    secrets, pip_ca = [parse_secret(s) for s in request.secrets], host_pip_ca()
    stand_ins: dict = {}
    if request.stand_in or request.compile:
        check_stand_in(request, variants)
    planned = []
    for variant in variants:
        plan = make_plan(
            variant,
            tag=request.tag,
            sets=request.sets,
            secrets=secrets,
            pip_ca=pip_ca,
            no_cache=request.no_cache,
            progress=request.progress,
            refs=refs[variant.name],
            sources=sources[variant.name],
        )
        if request.stand_in:
            plan, stand_ins[variant.name] = on_stand_in_plan(request, plan)
        refuse_zero_context(plan)
        check_build_gates(plan.variant)  # MILES_GATES_REQUIRE_GPU true: GPU gates cannot pass in a build
        local_images.check_platforms(plan.variant)
        text = render(plan)
        plan = registry.with_registry(plan, request.registry)
        check_tags(plan, request.registry)
        planned.append((plan, text, tags_asked(request, plan)))
    staged = [(plan, stage(plan, text, scope=scope), extra) for plan, text, extra in planned]

    made_here = any(local_images.names(plan.variant) for plan, _, _ in staged)
    client = engine.connect() if request.runs or made_here else None  # the engine that makes this machine's images
    if request.runs:
        engine.buildx_cmd()
    builder = builders.resolve(request.builder, client) if request.runs or request.builder else None
    shared_cache = bool(request.cache or request.cache_from)
    targets = []
    for plan, ctx, extra in staged:
        platforms, images = plan.variant.platforms, ()
        if builder is not None:
            builders.check(builder, platforms, push=request.push, cache_export=bool(request.cache))
        builders.check_emulation(builder, plan.variant, request.allow_emulation)
        if builder is not None and local_images.needs_registry(builder, plan.variant, shared_cache):
            if local_images.names(plan.variant):
                images = local_images.publish(client, plan.variant, platforms, request.registry, log=log, scope=scope)
        elif local_images.names(plan.variant):
            local_images.ensure(client, plan.variant, platforms, log=log, scope=scope)
        site = builders.site(builder, plan, images, request.cache, request.cache_from)
        named = ctx if request.runs else kept(ctx)  # a bake file names each context where it will be kept
        invocation = Invocation.of(plan, named, site, request.registry, extra)
        if plan.variant.name in stand_ins:
            invocation = on_stand_in(plan, invocation, stand_ins[plan.variant.name], client, pip_ca, log, scope)
        targets.append(Target(plan, ctx, invocation))
    return Prepared(tuple(targets), builder, client)


def check_stand_in(request: BuildRequest, variants: list) -> None:
    """`--stand-in-base` is refused with a push, a registry, another tag or a variant whose base is made here: a
    stand-in image never leaves this engine."""
    from toolkit.plan.stand_in import SUFFIX
    from toolkit.spec.bases import load_base

    if not request.stand_in:
        raise UsageError("--compile needs --stand-in-base (a real build compiles every step)")
    if not request.runs or request.push or request.registry or request.image_tag:
        raise UsageError("--stand-in-base builds into this engine only: no --push, --registry or --image-tag")
    if request.tag is not None and not request.tag.endswith(SUFFIX):
        raise UsageError(f"--tag {short(request.tag)}: a stand-in build's tag ends in {SUFFIX}")
    for v in variants:
        if v.base_build or v.wheelhouse:
            raise UsageError(f"--stand-in-base: {v.name} makes its own base here; build it without the flag")
        if load_base(v.base).is_rocm:
            raise UsageError(
                f"--stand-in-base: {v.name} is a ROCm variant, whose torch is its base's own ROCm build, on no index "
                "this host reaches: a stand-in would have no torch (its closure is resolved by `build.py lock`)"
            )


def on_stand_in_plan(request: BuildRequest, plan) -> tuple:
    """The plan (its `--set`s applied) as a stand-in build renders it, and what it skips."""
    from dataclasses import replace

    from toolkit.engine.stand_in_base import held
    from toolkit.plan.stand_in import plan_stand_in, stand_in_variant

    given = {item.partition("=")[0] for item in request.sources}
    found = plan_stand_in(plan.variant, given, request.compile, held(plan.variant))
    variant = stand_in_variant(plan.variant, found)
    image = request.tag or f"{variant.repository}:{variant.tag_suffix}"
    return replace(plan, variant=variant, image=image), found


def on_stand_in(plan, invocation, stand_in, client, pip_ca, log, scope):
    """The build of `plan` with its base's reference pointed at the stand-in (a named context), which is made here
    when missing; every skip and difference is printed and kept in the image's labels."""
    from dataclasses import replace

    from toolkit.engine import stand_in_base

    made = stand_in_base.ensure(client, plan.variant, log=log, scope=scope, pip_ca=pip_ca)
    found = replace(stand_in, differences=made.differences)
    for line in found.lines():
        log(f"stand-in: {line}")
    labels = (
        *invocation.labels,
        (stand_in_base.REF_LABEL, made.ref),
        (stand_in_base.DIFFERENCES_LABEL, " | ".join(found.lines())),
    )
    contexts = (*invocation.contexts, (plan.variant.base, f"docker-image://{made.ref}"))
    return replace(invocation, labels=labels, contexts=contexts)


def refuse_zero_context(plan) -> None:
    """A patch with a zero-context hunk can land anywhere (docs/architecture.md): no build starts with one."""
    from toolkit.render.lint import zero_context_findings

    refused = zero_context_findings(plan.variant)
    if refused:
        raise UsageError(f"refusing to build {plan.name}: zero-context hunk(s) in its patches: " + "; ".join(refused))


def check_tags(plan, reg) -> None:
    """Both tags a build moves must be valid references before anything runs (the hash is not known yet: the
    longest hash tag has the same shape, so a stand-in of the same length decides)."""
    if reg and reference_problem(registry.qualify("x:1", reg)):
        raise UsageError(f"--registry {short(reg)}: not a registry (host[:port][/namespace]), e.g. ghcr.io/org")
    for what, ref in (("tag", plan.image), ("input-hash tag", registry.hash_tag(plan, "0" * 12, reg))):
        problem = moving_tag_problem(ref)
        if problem:
            raise UsageError(f"{what} of {plan.name}: {problem}")


def check_cache(request: BuildRequest) -> None:
    for flag, ref in (("--cache", request.cache), ("--cache-from", request.cache_from)):
        if ref and reference_problem(f"{ref}:x"):
            raise UsageError(f"{flag} {short(ref)}: not a registry repository, e.g. ghcr.io/org/miles-cache")


def tags_asked(request: BuildRequest, plan) -> tuple:
    """Upstream's tag names (`--image-tag`), in the registry when one is given; checked like every tag. A
    `--custom-tag` is one tag component (no `/` or `:`: it can never name a registry host)."""
    if request.custom_tag is not None:
        if request.image_tag != "custom":
            raise UsageError("--custom-tag needs --image-tag custom")
        if not TAG_RE.fullmatch(request.custom_tag):
            raise UsageError(
                f"--custom-tag {short(request.custom_tag)}: not a tag component ([A-Za-z0-9_][A-Za-z0-9_.-]*)"
            )
    if not request.image_tag:
        return ()
    from toolkit.spec.upstream_tags import upstream_tags

    refs = [
        registry.qualify(t, request.registry)
        for t in upstream_tags(plan.variant, request.image_tag, request.custom_tag)
    ]
    for ref in refs:
        problem = moving_tag_problem(ref)
        if problem:
            raise UsageError(f"--image-tag {request.image_tag}: {problem}")
    return tuple(refs)
