"""What a spec value may be: the patterns and checks every value passes before it can reach a Dockerfile.

Each check raises SpecError naming the file and key (or, for the `*_problem` functions, returns why not), so a
value is refused where it is written. Names are identifiers, pip names and versions follow PEP 508/440, image
references the registry's grammar, paths are normalised and plain: no value can become an instruction or a shell
command. toolkit/render/dockerfile.py applies the same patterns again at render time.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from toolkit.errors import SpecError, short

# Patterns are applied with fullmatch: `$` would also accept a trailing newline.
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
VERSION_RE = re.compile(r"[A-Za-z0-9_.+!-]+")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
PLATFORM_RE = re.compile(r"linux/(amd64|arm64)")
# What `uname -m` says on each platform a spec may name (toolchains, wheel tags and debootstrap pick by it).
PLATFORM_MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class HiddenText:
    """Characters a value may not hold, by Unicode category, not by a hand list: controls (Cc: C0, C1, DEL), every
    format character (Cf: zero-width spaces and joiners, U+FEFF, and every bidi control, U+061C, U+200E/F,
    U+202A-U+202E, U+2066-U+2069, which make text display in another order than it is read) and the line and
    paragraph separators (Zl, Zp). `search(text)` answers like a compiled pattern's: the first such character, or
    None."""

    CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})

    def search(self, text: str) -> str | None:
        for c in text:
            if unicodedata.category(c) in self.CATEGORIES:
                return c
        return None


CONTROL_RE = HiddenText()
# BuildKit's Dockerfile parser reads lines of at most 64 KiB: a longer value can never build.
MAX_VALUE_BYTES = 64 * 1024
SAFE_PATH_RE = re.compile(r"[A-Za-z0-9._/+@-]+")
COMMAND_RE = re.compile(r"[A-Za-z][A-Za-z0-9._+-]*")
GIT_URL_RE = re.compile(r"(https|http|ssh|git)://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~+-]+)+/?")
EXTRAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(,[A-Za-z0-9][A-Za-z0-9._-]*)*")
DEBIAN_NAME_RE = re.compile(r"[a-z0-9][a-z0-9+.-]*")
PY_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+")
WHEEL_PLATFORM_RE = re.compile(r"[a-z0-9_]+")
# The image reference grammar (the registry's own: domain/path:tag@digest), ASCII only.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = rf"(?:{DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
REFERENCE_RE = re.compile(
    rf"(?P<name>{IMAGE_NAME})(?::(?P<tag>{TAG}))?(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*"
    rf"(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}}))?",
    re.ASCII,
)
IMAGE_NAME_RE = re.compile(IMAGE_NAME, re.ASCII)
TAG_RE = re.compile(TAG, re.ASCII)
HASH_TAG_ROOM = 13  # `-<hash12>` is appended to a tag suffix, and a tag holds at most 128 characters


def reference_problem(ref: str) -> str | None:
    """Why `ref` is not an image reference (name[:tag][@digest], the registry's grammar), or None."""
    m = REFERENCE_RE.fullmatch(ref) if isinstance(ref, str) else None
    if m is None:
        return f"not an image reference (lower-case name[:tag][@digest]): {short(ref)}"
    if len(m["name"]) > 255:
        return f"image name longer than 255 characters: {short(ref)}"
    return None


ANY_PLATFORM_RE = re.compile(r"[a-z0-9_]{1,32}/[a-z0-9_]{1,32}(/[a-z0-9_]{1,32})?")


def platform_problem(platform: str) -> str | None:
    """Why `platform` is not a platform as the engine names one (os/arch[/variant], e.g. linux/arm64), or None."""
    if isinstance(platform, str) and ANY_PLATFORM_RE.fullmatch(platform):
        return None
    return f"not a platform (os/arch[/variant], e.g. linux/arm64): {short(platform)}"


def check_image_ref(ref: str, file: str, key: str) -> None:
    """A base image is a valid reference, pinned when it names a tag other than `latest`, or a digest."""
    problem = reference_problem(ref)
    if problem:
        raise SpecError(file, key, problem)
    name, _, digest = ref.partition("@")
    if digest:
        if not DIGEST_RE.fullmatch(digest):
            raise SpecError(file, key, f"malformed digest in {short(ref)}")
        return
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        raise SpecError(file, key, f"unpinned base image {short(ref)}: name a tag or a digest")
    tag = last.split(":", 1)[1]
    if not tag or tag == "latest":
        raise SpecError(file, key, f"unpinned base image {short(ref)}: 'latest' moves; name a fixed tag or a digest")


def pep440(version: str) -> bool:
    """A PEP 440 version, written without spaces (packaging alone would accept surrounding whitespace)."""
    try:
        Version(version)
    except InvalidVersion:
        return False
    return bool(VERSION_RE.fullmatch(version))


def pip_name_problem(name: str) -> str | None:
    """Why `name` is not a PEP 508 distribution name with optional extras (`pkg`, `pkg[extra]`), or None."""
    try:
        req = Requirement(name)
    except InvalidRequirement:
        req = None
    if req is None or req.specifier or req.url or req.marker or not re.fullmatch(r"[A-Za-z0-9._\[\],-]+", name):
        return f"not a PEP 508 package name (with optional [extras]): {short(name)}"
    return None


def check_tag(tag: str, file: str, key: str) -> None:
    """A tag suffix is a registry tag with room for the `-<hash12>` the content-addressed tag appends."""
    if not TAG_RE.fullmatch(tag) or len(tag) > 128 - HASH_TAG_ROOM:
        raise SpecError(
            file,
            key,
            f"not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most {128 - HASH_TAG_ROOM} characters): {short(tag)}",
        )


def check_abs_path(path: str, file: str, key: str) -> None:
    """A path inside the image: absolute, normalised, plain characters (it is pasted into RUN lines)."""
    if not (path.startswith("/") and SAFE_PATH_RE.fullmatch(path) and posixpath.normpath(path) == path):
        raise SpecError(file, key, f"not an absolute normalised path: {short(path)}")


def check_rel_path(path: str, file: str, key: str) -> None:
    """A relative path that stays where it starts: normalised, no '..', plain characters."""
    if (
        not SAFE_PATH_RE.fullmatch(path)
        or path.startswith("/")
        or posixpath.normpath(path) != path
        or path.split("/")[0] == ".."
    ):
        raise SpecError(file, key, f"not a relative normalised path inside the repository: {short(path)}")


def check_python(python: str, file: str, key: str) -> None:
    """The image's python: a command name on PATH or an absolute path, never a shell fragment."""
    if not COMMAND_RE.fullmatch(python):
        check_abs_path(python, file, key)


def text_problem(value: str) -> str | None:
    """Why a string value can never reach a Dockerfile line intact, or None: text that is not UTF-8 (a command
    line decodes invalid bytes to lone surrogates), a control character, or more than one BuildKit line holds."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return f"not UTF-8 text: {short(value)}"
    if CONTROL_RE.search(value):
        return f"control character or format character (newline, tab, zero-width, bidi control, ...) in {short(value)}"
    if size > MAX_VALUE_BYTES:
        return f"{size} bytes, longer than the {MAX_VALUE_BYTES} a Dockerfile line holds: {short(value)}"
    return None


def moving_tag_problem(ref: str) -> str | None:
    """Why `ref` cannot be a tag a build moves, or None: it must be an image reference without a digest (a digest
    names content that already exists; no build can move it)."""
    problem = reference_problem(ref)
    if problem:
        return problem
    if "@" in ref:
        return f"a tag cannot carry a digest (@sha256:...): {short(ref)}"
    return None


def local_base_problem(ref: str) -> str | None:
    """Why `ref` cannot name a base image made on this machine (debootstrap + `docker import`), or None: an import
    gets a tag, never a digest."""
    if "@" in ref:
        return f"this family makes its base image locally, which gets a tag, never a digest: {short(ref)}"
    return None


def target_problem(name: str) -> str | None:
    """Why `name` cannot be a target (a variant name or an alias), or None; says so without echoing all of it."""
    if not NAME_RE.fullmatch(name) or len(name) > 128:
        return f"not a target name: {short(name)}"
    return None
