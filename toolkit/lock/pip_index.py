"""What a GPU image's pip steps meet on their package index, asked of the index itself before any build.

A GPU image cannot be built on every host, but every exact pin its steps install can be looked up where the build
will look it up: the default index (the host's configured `index-url`, else pip's own default) and any
`extra_index` a step declares. For each variant and platform this finds the file pip would take for each pin (a
wheel whose tags the base's Python and glibc accept; an sdist only where the step builds against the image,
`--no-build-isolation`), and the exact pins of the extras it asks for (read from the chosen wheel's core
metadata). A pin with no file, a yanked file, an sdist a step would build in isolation: each is a problem line
naming variant, step and pin. An index that cannot be reached leaves its pins `pending`, as the lock does for
artifacts. The index is read through the Simple API (PEP 691 JSON, or PEP 503 HTML); a wheel is downloaded only
for the metadata of a pin with extras where the index serves none separately (at most MAX_WHEEL bytes). The lock
(`toolkit/lock/pip_lock.py`) records what was found.
"""

from __future__ import annotations

import hashlib
import html.parser
import io
import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from email.parser import HeaderParser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from toolkit.spec import bases
from toolkit.spec.values import PLATFORM_MACHINES
from toolkit.steps import applies, expand

TIMEOUT = 60
MAX_PAGE = 32 * 2**20  # an index page larger than this is refused (a project's page is kilobytes to a few MB)
MAX_WHEEL = 16 * 2**20  # a wheel read for its metadata when the index has no separate copy
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class PinUse:
    """One exact pin a rendered step installs: where it comes from and what the step lets pip do with it."""

    step: str  # `steps[i]` of the variant's spec
    name: str  # as the step names it, `${ARG}`s expanded (extras included: `transformer-engine[pytorch]`)
    version: str
    indexes: tuple  # the step's extra indexes, expanded; the default index is always searched first
    builds: bool  # the step builds sdists against the image (--no-build-isolation)
    via: str = ""  # for an extra's pin: the requirement that brought it in

    @property
    def project(self) -> str:
        return canonicalize_name(Requirement(self.name).name)

    @property
    def extras(self) -> tuple:
        return tuple(sorted(Requirement(self.name).extras))


@dataclass(frozen=True)
class Found:
    """The file an index holds for a pin on one platform."""

    file: str
    sha256: str
    kind: str  # "wheel" or "sdist"
    index: str  # "default" or the extra index's URL
    version: str = ""
    via: str = ""  # for an extra's pin: the pin that brought it in


@dataclass
class Report:
    """One variant on one platform: what each pin resolved to, what is wrong, what could not be asked."""

    variant: str
    platform: str
    python: str
    found: dict = field(default_factory=dict)  # (step, name) -> Found
    problems: list = field(default_factory=list)  # one line each
    failed: dict = field(default_factory=dict)  # (step, name) -> why: the index answered, and nothing would build
    pending: list = field(default_factory=list)  # one line each: an index that did not answer


def default_index() -> str:
    """The index pip in the image uses: the host's configured one (a mirror of the same index), else pip's own."""
    from toolkit.plan.build_plan import host_pip_setting

    url = host_pip_setting("PIP_INDEX_URL", "index-url")
    if not url:
        from pip._internal.models.index import PyPI  # pip's built-in default, never spelled out here

        url = PyPI.simple_url
    return url.rstrip("/")


def pin_uses(variant) -> list[PinUse]:
    """Every exact pin the variant's rendered steps install (steps whose `when` excludes the variant are not)."""
    pins = variant.pip
    uses = []
    for i, step in enumerate(variant.steps):
        if not applies(step, variant.args):
            continue
        kind = step["kind"]
        if kind == "pip" and "prebuilt" not in step:
            names = step["value"]
        elif kind == "pip_py_files":
            names = [step["value"]]
        else:
            continue
        builds = "no-build-isolation" in step.get("flags", [])
        indexes = tuple(expand(u, variant.args) for u in step.get("extra_index", []))
        for name in names:
            uses.append(PinUse(f"steps[{i}]", expand(name, variant.args), pins[name], indexes, builds))
    return uses


def supported_tags(python: str, platform: str, glibc: str) -> list[Tag]:
    """The tags pip on CPython `python` accepts on `platform` with glibc `glibc` ("2.39"), best first."""
    major, minor = (int(x) for x in python.split(".")[:2])
    arch = PLATFORM_MACHINES[platform]
    newest = int(glibc.split(".")[1])
    plats = []
    for n in range(newest, 4, -1):
        plats.append(f"manylinux_2_{n}_{arch}")
        plats += {17: [f"manylinux2014_{arch}"], 12: [f"manylinux2010_{arch}"], 5: [f"manylinux1_{arch}"]}.get(n, [])
    plats.append(f"linux_{arch}")
    return list(cpython_tags((major, minor), platforms=plats)) + list(compatible_tags((major, minor), platforms=plats))


class _Links(html.parser.HTMLParser):
    """A PEP 503 page's anchors as PEP 691 file entries."""

    def __init__(self):
        super().__init__()
        self.files: list = []

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        a = dict(attrs)
        href = a.get("href") or ""
        url, _, frag = href.partition("#")
        hashes = dict([frag.split("=", 1)]) if "=" in frag else {}
        meta = a.get("data-core-metadata") or a.get("data-dist-info-metadata")
        self.files.append(
            {
                "filename": urllib.parse.unquote(url.rsplit("/", 1)[-1]),
                "url": url,
                "hashes": hashes,
                "yanked": a["data-yanked"] or True if "data-yanked" in a else False,
                "requires-python": a.get("data-requires-python"),
                "core-metadata": bool(meta) and meta != "false",
            }
        )


class Index:
    """One Simple API index, asked once per project (a run asks many pins of the same projects)."""

    def __init__(self, url: str, cafile: str | None = None):
        self.url = url.rstrip("/")
        self.cafile = cafile
        self.context = ssl.create_default_context(cafile=cafile) if self.url.startswith("https") else None
        self._pages: dict = {}
        self._metadata: dict = {}  # file URL -> its METADATA text (several variants ask for the same wheel)

    def _get(self, url: str, accept: str = ACCEPT, limit: int = MAX_PAGE) -> tuple[bytes, str]:
        req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "miles-image-toolkit"})
        with urllib.request.urlopen(req, timeout=TIMEOUT, context=self.context) as resp:
            body = resp.read(limit + 1)
            if len(body) > limit:
                raise ValueError(f"{url}: more than {limit} bytes")
            return body, resp.headers.get("Content-Type", "")

    def files(self, project: str) -> list | None:
        """The project's files (PEP 691 entries with absolute URLs), or None when the index has no such project."""
        if project not in self._pages:
            page = f"{self.url}/{project}/"
            try:
                body, ctype = self._get(page)
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    self._pages[project] = None
                    return None
                raise
            if "json" in ctype:
                entries = json.loads(body)["files"]
            else:
                parser = _Links()
                parser.feed(body.decode("utf-8", "replace"))
                entries = parser.files
            for entry in entries:
                entry["url"] = urllib.parse.urljoin(page, entry["url"])
            self._pages[project] = entries
        return self._pages[project]

    def metadata(self, entry: dict) -> str | None:
        """A wheel's core metadata: the index's copy (PEP 658/714), else, for a wheel of at most MAX_WHEEL bytes,
        its METADATA read from the wheel itself (checked against the index's sha256); None otherwise."""
        if entry["url"] not in self._metadata:
            self._metadata[entry["url"]] = self._read_metadata(entry)
        return self._metadata[entry["url"]]

    def _read_metadata(self, entry: dict) -> str | None:
        if entry.get("core-metadata") or entry.get("dist-info-metadata"):
            body, _ = self._get(entry["url"] + ".metadata", accept="*/*")
            return body.decode("utf-8", "replace")
        size = entry.get("size")  # PEP 503 pages give none: the read below is capped all the same
        if size is not None and (not isinstance(size, int) or size > MAX_WHEEL):
            return None
        body, _ = self._get(entry["url"], accept="*/*", limit=MAX_WHEEL)
        want = (entry.get("hashes") or {}).get("sha256")
        if want and hashlib.sha256(body).hexdigest() != want:
            raise ValueError(f"{entry['filename']}: the file's sha256 differs from the index's")
        with zipfile.ZipFile(io.BytesIO(body)) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
            return zf.read(name).decode("utf-8", "replace") if name else None


def _version(filename: str) -> tuple[str, Version | None, frozenset]:
    """(kind, version, tags) of an index file name; kind "" for a file pip would not install."""
    try:
        if filename.endswith(".whl"):
            _, version, _, tags = parse_wheel_filename(filename)
            return "wheel", version, tags
        _, version = parse_sdist_filename(filename)
        return "sdist", version, frozenset()
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return "", None, frozenset()


def _python_ok(spec: str | None, python: str) -> bool:
    if not spec:
        return True
    try:
        return SpecifierSet(spec).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True  # pip ignores a requires-python it cannot parse


def choose(entries: list, version: str, tags: list[Tag], python: str) -> tuple[dict | None, str]:
    """The file pip takes for `==version` (the best-ranked compatible wheel, else an sdist), and why not if none."""
    want = Version(version)
    rank = {t: i for i, t in enumerate(tags)}
    wheels, sdists, yanked, wrong_python = [], [], [], []
    for entry in entries:
        kind, ver, ftags = _version(entry["filename"])
        if not kind or ver != want:
            continue
        if entry.get("yanked"):
            yanked.append(entry)
            continue
        if not _python_ok(entry.get("requires-python"), python):
            wrong_python.append(entry)
            continue
        if kind == "sdist":
            sdists.append(entry)
        else:
            best = min((rank[t] for t in ftags if t in rank), default=None)
            if best is not None:
                wheels.append((best, entry))
    if wheels:
        return min(wheels, key=lambda x: x[0])[1], ""
    if sdists:
        return sdists[0], ""
    if yanked:
        return None, f"yanked ({yanked[0].get('yanked') if isinstance(yanked[0].get('yanked'), str) else 'no reason'})"
    if wrong_python:
        return None, f"requires Python {wrong_python[0].get('requires-python')}"
    return None, "no file for this version and platform"


def marker_environment(python: str, platform: str) -> dict:
    """PEP 508 marker values of a GPU base: CPython `python` on Linux `platform`."""
    return {
        "python_version": python,
        "python_full_version": python + ".0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": PLATFORM_MACHINES[platform],
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
    }


def extra_pins(metadata: str, extras: tuple, python: str, platform: str) -> list[Requirement]:
    """The exact (`==`) requirements the given extras add, for the target Python and platform."""
    env = marker_environment(python, platform)
    out = []
    for line in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or not any(req.marker.evaluate(dict(env, extra=x)) for x in extras):
            continue
        if req.marker.evaluate(dict(env, extra="")):
            continue  # not brought in by the extra
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
            out.append(req)
    return out


def check_variant(variant, default: Index, extra: dict, base=None) -> list[Report]:
    """One report per platform of the variant. `extra` maps an extra index's URL to its `Index` (made on demand)."""
    base = base or bases.load_base(variant.base)
    reports = []
    for platform in variant.platforms:
        report = Report(variant.name, platform, base.python_version)
        tags = supported_tags(base.python_version, platform, base.glibc)
        queue = list(pin_uses(variant))
        while queue:
            use = queue.pop(0)
            where = f"{variant.name} ({platform}) {use.step}: {use.name}=={use.version}"
            for u in use.indexes:
                if u not in extra:
                    extra[u] = Index(u, default.cafile)
            indexes = [("default", default)] + [(u, extra[u]) for u in use.indexes]
            chosen, why, unreachable = None, "", []
            for label, index in indexes:
                try:
                    entries = index.files(use.project)
                except (urllib.error.URLError, OSError, ValueError) as e:
                    unreachable.append(f"{label}: {getattr(e, 'reason', e)}")
                    continue
                if entries is None:
                    why = why or "no such project"
                    continue
                entry, reason = choose(entries, use.version, tags, base.python_version)
                if entry is not None:
                    chosen = (label, index, entry)
                    break
                why = reason
            if chosen is None:
                if unreachable:
                    report.pending.append(f"{where}: index not reachable ({'; '.join(unreachable)})")
                else:
                    report.problems.append(f"{where}{' (from ' + use.via + ')' if use.via else ''}: {why}")
                    report.failed[(use.step, use.name)] = why
                continue
            label, index, entry = chosen
            kind = "wheel" if entry["filename"].endswith(".whl") else "sdist"
            if kind == "sdist" and not use.builds:
                report.problems.append(
                    f"{where}: only an sdist ({entry['filename']}), which pip would build in isolation against the "
                    "index's newest build requirements: build it with no-build-isolation against the image"
                )
                report.failed[(use.step, use.name)] = "only an sdist, built in isolation"
                continue
            sha = (entry.get("hashes") or {}).get("sha256", "")
            report.found[(use.step, use.name)] = Found(entry["filename"], sha, kind, label, use.version, use.via)
            if use.extras and kind == "wheel":
                meta = index.metadata(entry)
                if meta is None:
                    report.problems.append(f"{where}: the index gives no metadata for {entry['filename']}")
                    continue
                for req in extra_pins(meta, use.extras, base.python_version, platform):
                    version = next(iter(req.specifier)).version
                    name = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")
                    via = f"{use.name}=={use.version}"
                    queue.append(PinUse(use.step, name, version, use.indexes, use.builds, via=via))
        reports.append(report)
    return reports


def host_index() -> Index:
    """The default index as this host reaches it (its configured index and the CA bundle its pip trusts)."""
    from toolkit.plan.build_plan import host_pip_ca

    return Index(default_index(), host_pip_ca())


def gpu_variants(catalog) -> list:
    """The GPU images: variants whose base a registry holds and a base file describes."""
    return [v for v in catalog.variants.values() if is_gpu(v)]


def is_gpu(v) -> bool:
    return not v.base_build and not v.wheelhouse and bases.has_base(v.base)


def main(argv=None) -> int:
    """`python3 -m toolkit.lock.pip_index [VARIANT...]`: print each problem and pending pin; exit 1 on a problem."""
    from toolkit.spec.catalog import load_catalog

    catalog = load_catalog()
    names = (argv if argv is not None else sys.argv[1:]) or [v.name for v in gpu_variants(catalog)]
    default, extra = host_index(), dict[str, Index]()
    bad = 0
    for name in names:
        for report in check_variant(catalog.resolve(name), default, extra):
            print(f"{report.variant} {report.platform} (Python {report.python}): {len(report.found)} pins found")
            for line in report.problems:
                print("  PROBLEM " + line)
            for line in report.pending:
                print("  pending " + line)
            bad += len(report.problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
