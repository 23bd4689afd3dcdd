#!/usr/bin/env python3
"""Build, gate, verify and publish the miles/sglang images from the declarative specs in images/.

Exit codes: 0 ok, 1 build or gate failed, 2 bad usage or bad spec, 3 no usable container engine,
130/143 stopped by SIGINT/SIGTERM (the build child stopped too, nothing tagged).
The flow is one way: spec -> plan -> render -> engine -> gates -> report (see README.md).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from toolkit.cleanup import Scope
from toolkit.cli import empty_option, parse
from toolkit.engine import docker_engine as engine
from toolkit.engine import registry
from toolkit.engine.calls import as_engine_error, engine_timeout
from toolkit.errors import BuildFailed, Interrupted, ToolkitError, UsageError, short
from toolkit.gates import sbom_attach
from toolkit.outputs import check_output, write_output
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.retry import retried, transient
from toolkit.spec.catalog import load_catalog
from toolkit.spec.values import platform_problem, reference_problem, target_problem


def out(line: str) -> None:
    print(line, flush=True)


def cmd_list(args) -> int:
    catalog = load_catalog()
    aliases: dict = {}
    for alias, name in catalog.aliases.items():
        aliases.setdefault(name, []).append(alias)
    for name, v in sorted(catalog.variants.items(), key=lambda kv: (kv[1].family, kv[0])):
        also = f" (alias: {', '.join(sorted(aliases[name]))})" if name in aliases else ""
        out(f"{name:<16} {v.family:<6} {','.join(v.platforms):<24} {v.base}{also}")
    return 0


def cmd_render(args) -> int:
    if args.output:
        check_output("-o", args.output)
    plan = make_plan(load_catalog().resolve(args.target), sets=args.set, revision="render")
    text = render(plan)
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_build(args) -> int:
    from toolkit.request import BuildRequest, prepare

    request = BuildRequest.from_args(args)
    # One clean-up scope around everything this build creates on the host (toolkit/cleanup.py).
    with Scope() as scope:
        prepared = prepare(request, scope, log=out)
        (target,) = prepared.targets
        return build_prepared(request, prepared.builder, prepared.client, target)


def build_prepared(request, builder, client, target) -> int:
    """Skip, build, tag, push: everything that runs on a prepared target (cmd_build's scope removes it afterwards)."""
    from toolkit.engine import builders

    plan, ctx, invocation = target.plan, target.ctx, target.invocation
    hash_tag, refs = invocation.hash_tag, invocation.tags
    if request.push:
        sbom_attach.oras_cmd()  # a push carries its SBOM: no oras, no build
    out(f"target {plan.name}: base {plan.variant.base}, input hash {ctx.short_hash}, tag {plan.image}")
    if builder.name:
        out(f"builder {builder.label}: {builder.driver} driver, platforms {','.join(plan.variant.platforms)}")
    if request.skip_existing:
        found, note = registry.find_existing(
            builder.client() if builder.engine_local else client,
            hash_tag,
            request.registry,
            pushing=request.push,
            moving=invocation.moving,  # every tag this build would move
        )
        if note:
            out(f"note: {note}")
        if found:
            out(f"skip: {hash_tag} exists {found} (same input hash); nothing to build")
            return 0
    if request.push and builders.pushes_itself(builder, plan.variant.platforms):
        # The builder pushes the image itself, and only when every step, gates included, passed: the gate step
        # itself fails without its report and nonce (templates/partials/gates.j2); a report in the log is judged.
        # A registry's transient answer to that push runs the build again, its steps from the builder's cache.
        digest, gate_steps = retried(
            lambda: pushed_build(plan, invocation, request.verbose),
            lambda e: isinstance(e, engine.PushFailed) and transient(str(e)),
            log=out,
            what=f"the push of {plan.name}",
        )
        judge_gates(plan, ctx, gate_steps, None, digest)
        for ref in refs:
            out(f"pushed {ref}@{digest}")
        out(f"digest: {registry.repository_of(hash_tag)}@{digest}")
        sbom_attach.attach_to_pushed(client, plan.variant, {registry.repository_of(r): digest for r in refs}, out)
        return 0
    gate_steps = []
    image_id = engine.build(plan, invocation, out=out, gate_steps=gate_steps, verbose=request.verbose)
    engine_of = builder.client() if builder.name else client
    judge_gates(plan, ctx, gate_steps, engine_of, image_id)
    # Only now, with every gate passed inside the build and its report proven, do tags move: all, or none.
    engine.tag_all(engine_of, image_id, refs)
    for ref in refs:
        out(f"tagged {ref}")
    if request.push:
        digests = {
            ref: retried(
                lambda ref=ref: engine.push(engine_of, ref, out=out),
                lambda e: isinstance(e, BuildFailed) and transient(str(e)),
                log=out,
                what=f"the push of {ref}",
            )
            for ref in refs
        }
        for digest in sorted(set(digests.values())):
            out(f"digest: {registry.repository_of(hash_tag)}@{digest}")
        out("note: pushed from the engine's image store (docker push): no BuildKit provenance goes with it")
        pushed = {registry.repository_of(ref): digest for ref, digest in digests.items()}
        sbom_attach.attach_to_pushed(engine_of, plan.variant, pushed, out)
    return 0


def pushed_build(plan, invocation, verbose: bool = False) -> tuple:
    """A build the builder pushes itself: (digest, the gate steps it reported)."""
    gate_steps: list = []
    return engine.build(plan, invocation.pushed(), out=out, gate_steps=gate_steps, verbose=verbose), gate_steps


def judge_gates(plan, ctx, gate_steps: list, engine_of, image_id: str) -> None:
    """BuildFailed (exit 1, one line, no tag moved) unless the gate step proved it ran: a report in its log (or, for a
    cached step, the one its layer keeps in the image) with this build's nonce, from a CPython 3, holding a check of
    every gate the config declares (toolkit/gates/report.py). A pushed build's cached step is judged by the step
    itself, which fails without its report and nonce."""
    from toolkit.gates.report import REPORT_PATH, report_problem
    from verify.report import find_report

    if not gate_steps:
        raise BuildFailed(f"build of {plan.name} failed: BuildKit reported no gate step")
    for status, report in gate_steps:
        if report is None and status == "cached" and engine_of is not None:
            kept = engine.read_image_file(engine_of, image_id, REPORT_PATH)
            report = find_report(kept.decode("utf-8", "replace").splitlines()) if kept is not None else None
        elif report is None and status == "cached":
            continue
        problem = report_problem(report, ctx.gate_nonce, plan.gates)
        if problem is not None:
            raise BuildFailed(f"build of {plan.name} failed: gate step: {problem}; no tag moved")


def cmd_verify(args) -> int:
    variant = load_catalog().resolve(args.target)
    for option in ("export_cst", "json", "junit"):  # before any gate runs
        if getattr(args, option):
            check_output("--" + option.replace("_", "-"), getattr(args, option))
    if args.export_cst:
        from toolkit.gates.cst_export import write_cst

        write_cst(variant.gates, variant.python, args.export_cst)
        out(f"wrote {args.export_cst}: container-structure-test config for {variant.name}")
        return 0
    if args.base:
        return _verify_base(variant, args)
    check_image_options(args)
    if args.reproduce:
        if args.platform or args.json or args.junit:
            raise UsageError("--reproduce compares an image of this engine: no --platform, --json or --junit")
        return _verify_reproduce(variant, args)
    for option in ("source", "set", "ref"):
        if getattr(args, option):
            raise UsageError(f"--{option} is for --reproduce (the rebuild's inputs)")
    from toolkit.gates.verify_image import by_platform, verify_image

    image = args.image or f"{variant.repository}:{variant.tag_suffix}"
    client = engine.connect()
    images = by_platform(client, image, args.platform)  # [(platform or None, ref)]: one per platform of a list
    if len(images) > 1 and (args.json or args.junit):
        raise UsageError(f"{image} holds {len(images)} platforms: pick one with --platform for --json/--junit")
    worst = 0
    for platform, ref in images:
        rc = verify_image(
            client, variant, ref, json_path=args.json, junit_path=args.junit, out=out, verbose=args.verbose
        )
        on = f" ({platform})" if platform else ""
        out(f"verify {variant.name} on {ref}{on}: {'PASS' if rc == 0 else 'FAIL'}")
        worst = max(worst, rc)
    return worst


def _verify_reproduce(variant, args) -> int:
    """Rebuild --image (default: the target's tag) from this tree with --no-cache and the image's own labels: 0 when
    the rebuild is the same image, 1 when not, naming the first layer and files that differ (toolkit/gates/reproduce).
    Refused (exit 2) unless this tree, with the given --source/--set/--ref, gives the image's input hash. Nothing is
    tagged; the rebuild is removed afterwards."""
    from dataclasses import replace

    from toolkit.gates import reproduce
    from toolkit.plan.build_plan import REVISION_LABEL
    from toolkit.render.context import INPUT_HASH_LABEL
    from toolkit.request import BuildRequest, prepare

    image = args.image or f"{variant.repository}:{variant.tag_suffix}"
    client = engine.connect()
    original = engine.image_id(client, image)
    if original is None:
        raise UsageError(f"--image {short(image)}: no such image in this engine (pull it first)")
    labels = client.api.inspect_image(original)["Config"].get("Labels") or {}
    request = BuildRequest(
        command="build",
        targets=(variant.name,),
        sources=tuple(args.source),
        refs=tuple(args.ref),
        sets=tuple(args.set),
        no_cache=True,
        verbose=args.verbose,
    )
    with Scope() as scope:
        (target,) = prepare(request, scope, log=out).targets
        plan, ctx, invocation = target.plan, target.ctx, target.invocation
        if labels.get(INPUT_HASH_LABEL) != ctx.input_hash:
            said, revision = (short(labels.get(k, "none"), 12, quote=False) for k in (INPUT_HASH_LABEL, REVISION_LABEL))
            raise UsageError(
                f"{short(image)} has input hash {said}, this tree gives {ctx.short_hash} for {variant.name}: check "
                f"out its revision ({revision}) and give the same --source, --set and --ref as its build"
            )
        # The image's own values for every label the build sets (a later commit with the same inputs says the
        # image's revision), so only what the build made can differ.
        invocation = replace(invocation, labels=tuple((k, labels.get(k, v)) for k, v in invocation.labels))
        out(f"reproduce {variant.name}: rebuilding {image} ({original[:19]}) with --no-cache")
        gate_steps: list = []
        rebuilt = engine.build(plan, invocation, out=out, gate_steps=gate_steps, verbose=args.verbose)
        try:
            judge_gates(plan, ctx, gate_steps, client, rebuilt)
            layers = [tuple(client.api.inspect_image(i)["RootFS"]["Layers"]) for i in (original, rebuilt)]
            wanted = reproduce.differing_layers(*layers)
            mine, theirs = (reproduce.read_image(client, i, wanted) for i in (original, rebuilt))
            found = reproduce.compare(mine, theirs)
            for line in reproduce.report_lines(found, mine):
                out(line)
            return 0 if found.same_id else 1
        finally:
            if rebuilt != original:
                client.images.remove(rebuilt, noprune=False)


def cmd_sbom(args) -> int:
    """A CycloneDX 1.6 SBOM of --image (default: the target's tag), from the gate runner's inventory inside it."""
    from toolkit.gates.sbom import image_sbom

    variant = load_catalog().resolve(args.target)
    if args.output:
        check_output("-o", args.output)  # before the engine is asked anything
    check_image_options(args)
    image = args.image or f"{variant.repository}:{variant.tag_suffix}"
    if args.attach:
        if args.output:
            raise UsageError("--attach writes the SBOM to the registry: no -o")
        return _attach_sbom(variant, image)
    text = image_sbom(engine.connect(), variant, image)
    if args.output:
        write_output(args.output, text)
        out(f"wrote {args.output}: CycloneDX 1.6 SBOM of {image}")
    else:
        sys.stdout.write(text)
    return 0


def _attach_sbom(variant, image: str) -> int:
    """`sbom --attach`: the pushed `image` (a registry reference, by tag or digest), each platform described and
    its SBOM attached to it in the registry (toolkit/gates/sbom_attach.py), as `build --push` does itself."""
    if not registry.names_registry(image):
        raise UsageError(f"--image {short(image)}: --attach needs a reference into a registry (REGISTRY/REPO:TAG)")
    sbom_attach.oras_cmd()
    named, _, given = image.partition("@")
    digest = given or registry.remote_digest(image)
    if digest is None:
        raise UsageError(f"--image {short(image)}: not in its registry")
    sbom_attach.attach_to_pushed(engine.connect(), variant, {registry.repository_of(named): digest}, out)
    return 0


def check_image_options(args) -> None:
    """`--image` is an image reference and `--platform` a platform (os/arch[/variant]), whatever verify does."""
    problem = reference_problem(args.image) if args.image else None
    if problem:
        raise UsageError(f"--image: {problem}")
    platform = getattr(args, "platform", None)  # `sbom` has none
    problem = platform_problem(platform) if platform else None
    if problem:
        raise UsageError(f"--platform: {problem}")


def _verify_base(variant, args) -> int:
    """The variant's base file (images/bases/) against the real base image: one line per fact that differs."""
    from toolkit.gates.base_check import check_base
    from toolkit.spec.bases import load_base

    check_image_options(args)
    base = load_base(variant.base)
    differences = check_base(engine.connect(), base, image=args.image, platform=args.platform)
    for line in differences:
        out(line)
    verdict = f"differs in {len(differences)} fact(s)" if differences else "matches"
    out(f"verify --base {variant.name}: {base.image} {verdict} {base.file}")
    return 1 if differences else 0


def cmd_bake(args) -> int:
    from toolkit.engine.bake import bake_file
    from toolkit.render.context import keep, kept
    from toolkit.request import BuildRequest, prepare

    log = out if args.output else (lambda line: print(line, file=sys.stderr, flush=True))
    if args.output:
        check_output("-o", args.output)
    with Scope() as scope:  # what is not kept (renamed into place) is removed, however the command ends
        prepared = prepare(BuildRequest.from_args(args), scope, log=log)
        for target in prepared.targets:
            log(f"target {target.plan.name}: input hash {target.ctx.short_hash}, context {kept(target.ctx).path}")
        # Contexts are kept only once the bake file that names them is written: a failure before leaves nothing.
        text = json.dumps(bake_file((t.plan.name, t.invocation) for t in prepared.targets), indent=2) + "\n"
        if args.output:
            write_output(args.output, text)
        else:
            sys.stdout.write(text)
        for target in prepared.targets:
            keep(target.ctx)
    if args.output:
        on = f" --builder {args.builder}" if args.builder else ""
        log(f"wrote {args.output}: {len(prepared.targets)} target(s); run `docker buildx bake{on} -f {args.output}`")
    return 0


def cmd_lock(args) -> int:
    """Exit 0 ok (or nothing moved), 1 something moved (--check), 2 bad input, 3 a remote unusable."""
    from toolkit.lock import family as lock
    from toolkit.lock import file as lock_file
    from toolkit.lock import git_sources
    from toolkit.lock.pip_closure import Trees, lock_sources
    from toolkit.table import table

    pins = git_sources.parse_pins(args.pin)
    if args.check and (args.update or pins or args.from_release_lock):
        raise UsageError("--check writes nothing: it takes no --update, --pin or --from-release-lock")
    release = git_sources.parse_release_lock(args.from_release_lock) if args.from_release_lock else None
    paths = [path for _, path in lock.families(args.family)]
    if not paths:
        out("lock: no family declares a policy (components.*.track or artifacts)")
        return 0
    trees = Trees(dict(lock_sources(args.source)))
    if args.check:
        rows, moved, errors = lock.check_families(paths, trees)
        out(table(["source", "locked", "upstream now", "moved?"], rows).rstrip("\n"))
        lock.raise_first(errors, "lock --check")
        return 1 if moved else 0
    rows, resolved = lock.lock_families(paths, args.update, pins, release, args.from_release_lock or "", trees)
    out(table(["source", "locked before", "locked now", "changed?"], rows).rstrip("\n"))
    for new, lpath, label in resolved:
        out(f"wrote {label}" if lock_file.write(lpath, new) else f"unchanged: {label}")
    return 0


def cmd_lint(args) -> int:
    from toolkit.render.lint import lint

    findings = lint(args.paths)
    for finding in findings:
        out(finding)
    out(f"lint: {len(findings)} finding(s)")
    return 1 if findings else 0


def cmd_clean(args) -> int:
    """Exit 0 ok, 1 something could not be removed, 2 bad usage, 3 no engine (images or the build cache asked for)."""
    from toolkit.clean import clean

    if args.target and (args.build_cache or args.no_images or args.tools):
        raise UsageError("--target removes one target's images only: it takes no --build-cache, --no-images or --tools")
    target = args.target and load_catalog().aliases.get(args.target, args.target)  # a target no spec names any more too
    needs_engine = not args.no_images or args.build_cache
    client = engine.connect() if needs_engine else None
    return clean(
        client,
        target=target,
        dry_run=args.dry_run,
        build_cache=args.build_cache,
        images=not args.no_images,
        tools=args.tools,
        out=out,
    )


COMMAND_FUNCS = {
    "build": cmd_build,
    "render": cmd_render,
    "verify": cmd_verify,
    "sbom": cmd_sbom,
    "bake": cmd_bake,
    "lint": cmd_lint,
    "lock": cmd_lock,
    "list": cmd_list,
    "clean": cmd_clean,
}


def fleet_options(p) -> None:
    p.add_argument("--builder", metavar="NAME", help="buildx builder or docker context (default: the engine)")
    p.add_argument("--cache", metavar="REF", help="registry cache: import REF:<target> and export to it (mode=max)")
    p.add_argument("--cache-from", metavar="REF", help="registry cache: import only (any builder)")
    p.add_argument(
        "--allow-emulation",
        action="store_true",
        help="compile kernels even for a platform the builder runs only under emulation (QEMU: days, not hours)",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="build.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    b = sub.add_parser("build", help="render, build with BuildKit, run the gates, tag (and push)")
    b.add_argument("--target", required=True)
    b.add_argument("--tag", help="image reference to move on success (default: <repository>:<variant>)")
    b.add_argument("--push", action="store_true", help="push the tags after the gates passed")
    b.add_argument("--no-cache", action="store_true")
    b.add_argument("--progress", choices=("auto", "plain"), default="auto")
    b.add_argument(
        "--verbose",
        action="store_true",
        help="also list every allowed pip-check line of the gates, with the rule that allowed it and its reason",
    )
    b.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a spec value")
    b.add_argument("--secret", action="append", default=[], metavar="id=NAME,src=FILE", help="a BuildKit secret")
    b.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="build git component NAME from a local checkout or source tarball instead of its pinned commit",
    )
    b.add_argument(
        "--ref",
        action="append",
        default=[],
        metavar="NAME=COMMIT",
        help="build git component NAME from this commit of its remote instead of the locked one (this build only)",
    )
    b.add_argument(
        "--skip-existing",
        action="store_true",
        help="do nothing when an image with this input hash exists locally or in the target registry",
    )
    b.add_argument("--registry", help="registry/namespace the tags live in, e.g. ghcr.io/org (REGISTRY/repository:tag)")
    fleet_options(b)
    b.add_argument("--image-tag", choices=("dev", "latest", "custom"), help="also upstream's tag names (spec data)")
    b.add_argument("--custom-tag", metavar="NAME", help="the name for --image-tag custom")
    b.add_argument(
        "--stand-in-base",
        action="store_true",
        help="a GPU variant on a stand-in for its base, made here; compiles and unfetched sources skipped, "
        "tagged <variant>-standin, never pushed",
    )
    b.add_argument(
        "--compile",
        action="append",
        default=[],
        metavar="STEP",
        help="with --stand-in-base: build this compiling step too (its name as the build lists it)",
    )

    r = sub.add_parser("render", help="print (or write) the rendered Dockerfile")
    r.add_argument("--target", required=True)
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("-o", "--output", metavar="FILE")

    v = sub.add_parser("verify", help="run the target's gates inside an existing image")
    v.add_argument("--target", required=True)
    v.add_argument("--image", help="image to verify (default: the target's tag); a registry list: every platform")
    v.add_argument("--platform", help="verify only this platform of a multi-platform image (e.g. linux/arm64)")
    v.add_argument("--json", metavar="FILE")
    v.add_argument("--junit", metavar="FILE")
    v.add_argument("--export-cst", metavar="FILE", help="write the gates as a container-structure-test config instead")
    v.add_argument("--base", action="store_true", help="check the target's base file against the base image instead")
    v.add_argument(
        "--reproduce",
        action="store_true",
        help="rebuild the image with --no-cache from this tree and its labels; say whether it is the same image, "
        "else which layer and files differ",
    )
    for option, meta, said in (
        ("--source", "NAME=PATH", "with --reproduce: a local tree or tarball the image's build was given"),
        ("--set", "KEY=VALUE", "with --reproduce: a spec override the image's build was given"),
        ("--ref", "NAME=COMMIT", "with --reproduce: a commit the image's build was given"),
    ):
        v.add_argument(option, action="append", default=[], metavar=meta, help=said)
    v.add_argument(
        "--verbose",
        action="store_true",
        help="also list every allowed pip-check line of the gates, with the rule that allowed it and its reason",
    )

    m = sub.add_parser("sbom", help="write a CycloneDX SBOM of an image: its Python distributions and Debian packages")
    m.add_argument("--target", required=True)
    m.add_argument("--image", help="image to describe (default: the target's tag)")
    m.add_argument("-o", "--output", metavar="FILE", help="write the SBOM here (default: stdout)")
    m.add_argument(
        "--attach",
        action="store_true",
        help="attach each platform's SBOM to the pushed --image in its registry (an OCI referrer), as --push does",
    )

    k = sub.add_parser("bake", help="write a buildx bake file (JSON) for a set of targets")
    k.add_argument("--target", action="append", required=True)
    k.add_argument("-o", "--output", metavar="FILE")
    k.add_argument("--registry", help="registry/namespace for tags, e.g. ghcr.io/org")
    fleet_options(k)
    k.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="every target with git component NAME takes it from this checkout or tarball",
    )
    k.add_argument(
        "--ref",
        action="append",
        default=[],
        metavar="NAME=COMMIT",
        help="every target with git component NAME builds it from this commit of its remote",
    )

    lk = sub.add_parser(
        "lock", help="resolve the specs' policies (branch, tag, commit, artifacts) into images/*.lock.json"
    )
    lk.add_argument("--family", action="append", default=[], metavar="F", help="only this family (default: all)")
    lk.add_argument(
        "--update",
        action="append",
        nargs="?",
        const="*",
        default=[],
        metavar="NAME",
        help="re-resolve NAME even if its policy is unchanged (alone: every source)",
    )
    lk.add_argument("--check", action="store_true", help="resolve everything now, write nothing; exit 1 if moved")
    lk.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME=COMMIT",
        help="record COMMIT for NAME without asking its remote (a host that cannot reach it); --check verifies it",
    )
    lk.add_argument(
        "--from-release-lock",
        metavar="FILE",
        help="upstream's release-lock.json: its sglang and Megatron-LM commits become the lock's",
    )

    lk.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="read component NAME's requirements from a local tree or source tarball (a host that cannot fetch it)",
    )

    lint = sub.add_parser("lint", help="overlay guard on patches + hadolint on every rendered target")
    lint.add_argument("paths", nargs="*", metavar="PATCH_OR_DIR")

    sub.add_parser("list", help="list targets")

    c = sub.add_parser("clean", help="remove the project's images, the wheelhouse and what runs leave on disk")
    c.add_argument("--dry-run", action="store_true", help="print what would be removed, with sizes; remove nothing")
    c.add_argument("--build-cache", action="store_true", help="also prune the engine's BuildKit cache")
    c.add_argument("--target", help="only the images built for this target (no folder, no cache)")
    c.add_argument("--no-images", action="store_true", help="only the folders: no image, no engine needed")
    c.add_argument("--tools", action="store_true", help="also the lint tools ci/setup.sh installs under .cache/")
    return p


def on_signal(signum, frame):
    """SIGINT/SIGTERM become an exception, so the build child is stopped and staging removed on the way out. The
    first signal starts that way out; later ones are ignored, so they cannot cut the clean-up short (every wait on
    the way is bounded: a stopped child gets engine.STOP_GRACE seconds, then SIGKILL)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


def check_targets(args) -> None:
    """A --target is a name: anything else is refused without echoing all of it (a CI variable can be huge)."""
    targets = getattr(args, "target", None)
    for target in [targets] if isinstance(targets, str) else targets or []:
        problem = target_problem(target)
        if problem:
            raise UsageError(f"--target: {problem}")


def check_environment() -> None:
    """Every variable the toolkit reads, read now by toolkit/strict.py's rule: a bad value is exit 2 naming it."""
    from toolkit.gates.verify_image import gpu_required
    from toolkit.plan.source_archive import member_caps

    engine_timeout()
    member_caps()
    gpu_required()


def plain_streams() -> None:
    """Text that cannot be encoded (a file name of bytes that are not UTF-8, echoed back) is written escaped,
    never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv=None) -> int:
    plain_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].startswith("--target"):
        argv.insert(0, "build")  # `build.py --target T` is `build.py build --target T`
    p = parser()
    args = parse(p, argv)
    if isinstance(args, int):
        return args
    if args.command is None:
        p.print_usage(sys.stderr)
        return 2
    try:
        empty = empty_option(args)
        if empty:
            raise UsageError(f"{empty}: an empty value; give one, or leave the option out")
        check_environment()  # the environment's values are data too: checked before anything runs
        check_targets(args)
        return COMMAND_FUNCS[args.command](args)
    except ToolkitError as e:
        print(f"build.py: {e}", file=sys.stderr)
        return e.exit_code
    except Exception as e:  # noqa: BLE001 - an engine request that got no answer is exit 3; anything else re-raises
        engine_error = as_engine_error(e)
        if engine_error is None and isinstance(e, OSError):  # the host failed the command (read-only, disk full)
            where = f": {short(str(e.filename))}" if e.filename else ""
            print(f"build.py: {e.strerror or type(e).__name__}{where} (nothing was tagged)", file=sys.stderr)
            return 1
        if engine_error is None:
            raise
        print(f"build.py: {engine_error}", file=sys.stderr)
        return engine_error.exit_code
    except KeyboardInterrupt:
        print(f"build.py: {Interrupted(signal.SIGINT)}", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    sys.exit(main())
