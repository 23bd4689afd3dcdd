"""Artifacts in a family's lock (its `artifacts` section): download each declared file (or list and download each
asset of a release), check it against its host now, and record its size and sha256.

An artifact never locked whose host does not answer is left pending: it gets no record (its step is left out of
the build) and its row says so, instead of failing the lock. A hand-edited URL is never carried forward.
"""

from __future__ import annotations

from toolkit.errors import ToolkitError, short
from toolkit.lock import file as lock_file
from toolkit.lock import remote
from toolkit.lock.policy import ALL, assets_fingerprint, check_locked_urls
from toolkit.plan.artifacts import file_name_problem, url_problem

PENDING = "pending (its host did not answer)"


def show(entry) -> str:
    """An artifact's lock entry in a table cell: its digest (or its assets' fingerprint), shortened."""
    if entry is None:
        return "(none)"
    if "assets" in entry:
        return f"{len(entry['assets'])} assets {assets_fingerprint(entry['assets'])[:12]}"
    return f"sha256:{entry['sha256'][:12]}"


def _fetch(policy) -> dict:
    """One artifact's lock entry, downloaded now."""
    if "url" in policy.policy:
        got = remote.fetch(policy.policy["url"])
        return {"policy": policy.policy, "url": policy.policy["url"], "size": got.size, "sha256": got.sha256}
    rel = policy.policy["release"]
    assets = {}
    for a in remote.release_assets(rel["repo"], rel["tag"]):
        if file_name_problem(a.name) or url_problem(a.url):
            raise remote.RemoteUnavailable(
                f"release {rel['repo']}@{rel['tag']}: asset {short(a.name)} has no plain URL"
            )
        got = remote.fetch(a.url, size=a.size, sha256=a.sha256)
        assets[a.name] = {"url": a.url, "size": got.size, "sha256": got.sha256, "updated": a.updated}
    if not assets:
        raise remote.RemoteNotFound(f"release {rel['repo']}@{rel['tag']}: no assets")
    return {"policy": policy.policy, "assets": assets}


def lock(family: str, artifacts: dict, old: dict, update=()) -> tuple:
    """Resolve a family's artifacts, writing nothing: (the new `artifacts` section, table rows, [(name, error)]).
    An entry whose policy is unchanged is kept unless `update` names it (or ALL) or its URL was edited by hand; the
    rest are downloaded in one pool, and one never locked whose host did not answer is pending, not an error."""
    new: dict = {}
    tasks: dict = {}
    for name, policy in artifacts.items():
        prev = old.get(name)
        edited = prev is not None and "url" in policy.policy and prev.get("url") != policy.policy["url"]
        refresh = edited or ALL in update or name in update  # a hand-edited URL is never carried forward
        if prev is not None and prev["policy"] == policy.policy and not refresh:
            new[name] = prev
        else:
            tasks[name] = lambda p=policy: _fetch(p)
    pending, errors = {}, []
    for name, value in remote.run_all(tasks).items():
        if isinstance(value, remote.RemoteUnreachable) and name not in old:
            pending[name] = str(value)
        elif isinstance(value, ToolkitError):
            errors.append((name, value))
        else:
            new[name] = value
    rows = []
    for name in sorted(set(old) | set(new) | set(pending)):
        before, now = old.get(name), new.get(name)
        changed = PENDING if name in pending else lock_file.changed(before, now)
        rows.append([f"{family}/{name}", show(before), show(now), changed])
    return new, rows, errors


def _check_one(policy, entry) -> tuple:
    """(upstream now, moved?) of one artifact: a URL is downloaded again, a release compared by its listing."""
    if entry is not None and entry["policy"] != policy.policy:
        entry = None
    if "url" in policy.policy:
        got = remote.fetch(policy.policy["url"])
        size_moved = entry is not None and entry["size"] is not None and got.size != entry["size"]
        moved = entry is None or got.sha256 != entry["sha256"] or size_moved
        return f"sha256:{got.sha256[:12]}", "yes" if moved else "no"
    rel = policy.policy["release"]
    listed = remote.release_assets(rel["repo"], rel["tag"])
    locked = (entry or {}).get("assets", {})
    moved = entry is None or sorted(locked) != [a.name for a in listed]
    for a in listed:
        rec = locked.get(a.name)
        if rec and (
            rec["size"] != a.size or rec.get("updated") != a.updated or (a.sha256 and a.sha256 != rec["sha256"])
        ):
            moved = True
    return f"{len(listed)} assets listed", "yes" if moved else "no"


def check(family: str, artifacts: dict, lock: dict, label: str) -> tuple:
    """Ask every host now, write nothing: (table rows, anything moved?, [(name, error)]). A lock whose URL differs
    from the spec's is refused first (SpecError naming the lock file)."""
    check_locked_urls(lock, artifacts, label)
    locked = lock["artifacts"]
    tasks = {n: (lambda p=p, n=n: _check_one(p, locked.get(n))) for n, p in artifacts.items()}
    return remote.check_all(family, tasks, locked, show)
