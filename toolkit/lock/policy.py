"""Policies in a spec, and the hook that fills their pins from the family's lock when the spec loads.

A git component may say what it follows instead of naming a commit:

    miles: {git: https://github.com/radixark/miles.git, track: {tag: v0.1.0}, why: "the release we ship"}

`track` is `{branch: NAME}` (the branch head when last locked), `{tag: NAME}` (the commit the tag names),
`{commit: SHA}` (fixed), or `{commit: SHA, branch: NAME}` (fixed, with the branch a development image would
follow: `lock --check` shows its head, and never counts it as moved). A family may also declare `artifacts`, files
a build downloads by URL and checks by digest (toolkit/plan/artifacts.py): `{url: URL}` (one file) or
`{release: {repo: OWNER/NAME, tag: TAG}}` (every asset of a GitHub release tag). The spec keeps the policy and its
`why`; the lock (`toolkit/lock/file.py`) keeps what it resolved to. On load, `fill_from_lock` writes each tracked
component's `ref` and each artifact's records from the lock (an artifact the lock does not hold yet is marked
pending), and drops the policy text, so the variant (and its input hash) carries exactly the pins.
A component without `track` keeps its hand-written `ref` as before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import SpecError, short
from toolkit.lock import file as lock_file
from toolkit.plan.artifacts import url_problem
from toolkit.spec.refnames import ref_name_problem
from toolkit.spec.values import COMMIT_RE, IDENT_RE

ALL = "*"  # `lock --update` without a name: every source of every kind
REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
# BuildKit treats an http(s) context as git only when its path ends in `.git` (otherwise it fetches it as a file).
TRACKED_GIT_RE = re.compile(r"(https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~+-]+)+\.git|(ssh|git)://\S+)")


@dataclass(frozen=True)
class GitPolicy:
    name: str
    git: str
    track: dict  # one of {branch}, {tag}, {commit}, {commit, branch}

    @property
    def fixed(self) -> str | None:
        return self.track.get("commit")

    def describe(self) -> str:
        if "commit" in self.track:
            on = f" (dev: branch {self.track['branch']})" if "branch" in self.track else ""
            return f"commit {self.track['commit'][:12]}{on}"
        kind = "branch" if "branch" in self.track else "tag"
        return f"{kind} {self.track[kind]}"


@dataclass(frozen=True)
class ArtifactPolicy:
    name: str
    policy: dict  # {"url": URL} or {"release": {"repo": R, "tag": T}}

    def describe(self) -> str:
        if "url" in self.policy:
            return self.policy["url"]
        rel = self.policy["release"]
        return f"release {rel['repo']}@{rel['tag']}"


def check_track(track, file: str, key: str) -> None:
    if not isinstance(track, dict) or not track:
        raise SpecError(file, key, "expected {branch: NAME}, {tag: NAME}, {commit: SHA} or {commit: SHA, branch: NAME}")
    kinds = set(track)
    if kinds not in ({"branch"}, {"tag"}, {"commit"}, {"commit", "branch"}):
        raise SpecError(file, key, f"expected branch, tag, commit or commit + branch, got {short(sorted(kinds))}")
    for kind, value in track.items():
        if kind == "commit":
            if not isinstance(value, str) or not COMMIT_RE.fullmatch(value):
                raise SpecError(file, f"{key}.commit", f"not a 40-hex commit: {short(value)}")
        else:
            problem = ref_name_problem(value)
            if problem:
                raise SpecError(file, f"{key}.{kind}", problem)


def check_artifact(name: str, spec, file: str) -> ArtifactPolicy:
    key = f"artifacts.{name}"
    if not IDENT_RE.fullmatch(name):
        raise SpecError(file, short(key, 80, quote=False), "artifact names are identifiers")
    if not isinstance(spec, dict) or set(spec) - {"url", "release", "why"} or ("url" in spec) == ("release" in spec):
        raise SpecError(file, key, "expected `url: URL` or `release: {repo: OWNER/NAME, tag: TAG}` (plus `why`)")
    if "url" in spec:
        problem = url_problem(spec["url"])
        if problem:
            raise SpecError(file, f"{key}.url", problem)
        return ArtifactPolicy(name, {"url": spec["url"]})
    rel = spec["release"]
    if not isinstance(rel, dict) or set(rel) != {"repo", "tag"}:
        raise SpecError(file, f"{key}.release", "expected {repo: OWNER/NAME, tag: TAG}")
    if not isinstance(rel["repo"], str) or not REPO_RE.fullmatch(rel["repo"]):
        raise SpecError(file, f"{key}.release.repo", f"not OWNER/NAME: {short(rel['repo'])}")
    problem = ref_name_problem(rel["tag"])
    if problem:
        raise SpecError(file, f"{key}.release.tag", problem)
    return ArtifactPolicy(name, {"release": {"repo": rel["repo"], "tag": rel["tag"]}})


def _locations(raw: dict):
    """(key prefix, components mapping) for the family defaults and each variant's overrides."""
    yield "", raw.get("components") or {}
    for vname, over in (raw.get("variants") or {}).items():
        yield f"variants.{vname}.", (over or {}).get("components") or {}


def policies(raw: dict, file: str) -> tuple:
    """({component: GitPolicy}, {artifact: ArtifactPolicy}, {component: spec key of its track}) declared by a
    family. A family's lock holds one pin per name, so every variant that tracks a component tracks the same one."""
    family = raw.get("components") or {}
    git: dict = {}
    where: dict = {}
    for prefix, comps in _locations(raw):
        for name, comp in comps.items():
            base = {} if not prefix else (family.get(name) or {})
            merged = {**base, **comp}
            if "track" not in merged:
                continue
            key = f"{prefix}components.{name}"
            for layer, lkey in ((comp, key), (base, f"components.{name}")):
                if "ref" in layer:
                    raise SpecError(file, f"{lkey}.ref", "with `track`, the pin comes from the lock; remove `ref`")
            if "track" in comp:
                check_track(comp["track"], file, f"{key}.track")
            if not isinstance(merged.get("git"), str) or not TRACKED_GIT_RE.fullmatch(merged["git"]):
                raise SpecError(
                    file,
                    f"{key}.git",
                    f"a tracked git URL is https://HOST/PATH.git (or ssh://, git://): {short(merged.get('git'))}",
                )
            policy = GitPolicy(name, merged["git"], dict(merged["track"]))
            seen = git.setdefault(name, policy)
            if seen != policy:
                raise SpecError(
                    file,
                    f"{key}",
                    f"tracks {policy.describe()} of {policy.git}, elsewhere {seen.describe()} of {seen.git}: "
                    "a family's lock holds one pin per component",
                )
            where.setdefault(name, f"{key}.track" if "track" in comp else f"components.{name}.track")
    artifacts = {n: check_artifact(n, a, file) for n, a in (raw.get("artifacts") or {}).items()}
    names = {n for _, comps in _locations(raw) for n in comps}
    for name in artifacts:
        if name in names:
            raise SpecError(file, f"artifacts.{name}", "also a component name (both label io.miles.source.<name>)")
    return git, artifacts, where


def fill_from_lock(raw: dict, spec_path: Path, file: str, lock: dict | None = None) -> None:
    """The spec loader's hook: each tracked component's `ref` and each artifact's records, from the lock."""
    git, artifacts, where = policies(raw, file)
    for _, comps in _locations(raw):
        for comp in comps.values():
            if isinstance(comp, dict):
                comp.pop("why", None)
    if not git and not artifacts:
        return
    path = lock_file.lock_path(spec_path)
    label = str(Path(file).with_name(path.name))
    family = raw["family"]
    lock = lock if lock is not None else lock_file.load(path, label, family)
    check_locked_urls(lock, artifacts, label)
    fix = f"run `python3 build.py lock --family {family}`"
    for name, policy in git.items():
        entry = (lock or {}).get("sources", {}).get(name)
        if entry is None:
            raise SpecError(file, where[name], f"no pin in {label}: {fix}")
        if entry["git"] != policy.git or entry["policy"] != policy.track:
            raise SpecError(
                file,
                where[name],
                f"{label} pins {entry['git']} for {GitPolicy(name, '', entry['policy']).describe()}, "
                f"not this policy: {fix}",
            )
    for _, comps in _locations(raw):
        for name, comp in comps.items():
            if name in git and "track" in comp:
                assert lock is not None  # every tracked component has a pin (checked above)
                comp["ref"] = lock["sources"][name]["commit"]
                del comp["track"]
    for name, policy in artifacts.items():
        entry = (lock or {}).get("artifacts", {}).get(name)
        if entry is None:  # declared before anyone locked it: pending (toolkit/plan/artifacts.py)
            raw["artifacts"][name] = {"pending": True, **policy.policy}
        elif entry["policy"] != policy.policy:
            raise SpecError(file, f"artifacts.{name}", f"{label} pins another policy for it: {fix}")
        else:
            raw["artifacts"][name] = artifact_record(entry)


def check_locked_urls(lock: dict | None, artifacts: dict, label: str) -> None:
    """A lock's URL of a `url` artifact is the spec's, byte for byte: a lock change alone never fetches another file
    (nor puts another name into a Dockerfile)."""
    for name, policy in artifacts.items():
        entry = (lock or {}).get("artifacts", {}).get(name)
        if entry is not None and "url" in policy.policy and entry.get("url") != policy.policy["url"]:
            raise SpecError(
                label,
                f"artifacts.{name}.url",
                f"is not the spec's URL {short(policy.policy['url'])}: run `python3 build.py lock --update {name}`",
            )


def artifact_record(entry: dict) -> dict:
    """What a variant carries of a locked artifact: where it is and what it must hash to (no audit metadata)."""
    if "assets" in entry:
        assets = {a: {k: r[k] for k in ("sha256", "size", "url")} for a, r in sorted(entry["assets"].items())}
        return {"release": dict(entry["policy"]["release"]), "assets": assets}
    return {k: entry[k] for k in ("sha256", "size", "url")}


def assets_fingerprint(assets: dict) -> str:
    """sha256 over each asset's name, sha256 and size: the content of a release, unlike its listing metadata."""
    lines = "".join(f"{n} {r['sha256']} {r['size']}\n" for n, r in sorted(assets.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def artifact_origin(record: dict) -> str:
    """The `io.miles.source.<artifact>` label: where a locked artifact comes from and what it hashes to."""
    if record.get("pending"):
        where = record.get("url") or "release {repo}@{tag}".format(**record["release"])
        return f"pending: {where} is not in the lock (steps that need the file are left out)"
    if "assets" in record:
        rel = record["release"]
        return (
            f"{rel['repo']}@{rel['tag']} sha256:{assets_fingerprint(record['assets'])} ({len(record['assets'])} assets)"
        )
    return f"{record['url']} sha256:{record['sha256']}"
