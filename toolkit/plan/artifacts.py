"""Checksum-pinned files in a build: the stages that fetch them, and how a step with a prebuilt wheel is built.

An artifact is a file a family declares by URL (`artifacts:` in the spec: the policy and its why) whose size and
sha256 the lock holds. BuildKit fetches it itself, in a stage of its own:

    FROM scratch AS art-NAME
    ADD --checksum=sha256:<digest> ["<url>", "/<file>"]

and the one step that uses it bind-mounts that stage read-only (`/tmp/artifacts/NAME/<file>`), so nothing of the
file reaches a layer unless the step installs it, and a file that does not hash to the lock's digest fails the
build at that stage. An artifact the lock does not hold yet is *pending*: the spec may declare it before anyone
could download it (the lock fills it on a host that reaches the URL); a step that needs its file is left out of
the image, and the image's label says so.

A `source` or `pip` step may name a wheel artifact as `prebuilt: NAME`. The build then installs, in this order,
the wheel of the same distribution from `--source wheels=DIR` (a folder of prebuilt wheels, content-hashed like
any local source), the locked artifact, or, while the artifact is pending, the step's own build from source.
The `io.miles.build.<pin or component>` label records which one ran.
"""

from __future__ import annotations

import re
import urllib.parse

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from toolkit.errors import UsageError, short

STAGE_PREFIX = "art-"
MOUNT_DIR = "/tmp/artifacts"
WHEELS = "wheels"  # the `--source` name of a folder of prebuilt wheels
WHEELS_DIR = "/tmp/prebuilt-wheels"
BUILD_LABEL_PREFIX = "io.miles.build."
# What a URL may spell (percent escapes included), and what each segment of its path may be once decoded: the
# decoded file name is what a RUN line and a stage path hold, so it is judged in that form.
URL_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%+@=,-]*)+")
SEGMENT_RE = re.compile(r"[A-Za-z0-9._~+@=,-]*")
FILE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}")


def file_name_problem(name) -> str | None:
    """Why `name` cannot be a file name a Dockerfile holds (an artifact's, a wheel's), or None: one plain segment,
    no separator, no `..`, no character outside [A-Za-z0-9._+-], at most 255 characters."""
    if not isinstance(name, str) or not FILE_NAME_RE.fullmatch(name):
        return f"not a plain file name ([A-Za-z0-9][A-Za-z0-9._+-]*, at most 255 characters): {short(name)}"
    return None


def url_problem(url) -> str | None:
    """Why `url` cannot be an artifact's URL, or None: a plain http(s) URL whose path, percent-decoded, is plain
    segments (none `.` or `..`) and ends in a plain file name."""
    if not isinstance(url, str) or not URL_RE.fullmatch(url):
        return f"not a plain http(s) URL: {short(url)}"
    segments = [urllib.parse.unquote(s, errors="strict") if _decodes(s) else "\ufffd" for s in _path(url)]
    if any(s in (".", "..") or not SEGMENT_RE.fullmatch(s) for s in segments):
        return f"its path, decoded, leaves its folder or holds a character outside [A-Za-z0-9._~+@=,-]: {short(url)}"
    problem = file_name_problem(segments[-1])
    return f"its last path segment, decoded, is {problem}" if problem else None


def _path(url: str) -> list:
    return urllib.parse.urlsplit(url).path.split("/")[1:]


def _decodes(segment: str) -> bool:
    try:
        urllib.parse.unquote(segment, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def file_name(record: dict) -> str:
    """The artifact's file name: the last segment of its URL, decoded (a wheel keeps the name pip needs); a URL
    whose decoded path is not plain is refused here too, whatever loaded it."""
    problem = url_problem(record.get("url"))
    if problem:
        raise UsageError(f"artifact URL: {problem}; refusing to use it")
    return urllib.parse.unquote(_path(record["url"])[-1])


def is_pending(record: dict) -> bool:
    return bool(record.get("pending"))


def wheel_dist(filename: str) -> str | None:
    """The canonical distribution name of a wheel file name, or None when it is not one."""
    parsed = wheel_version(filename)
    return parsed[0] if parsed else None


def is_wheel_of(filename: str, name: str, version: str) -> bool:
    """Whether a wheel file name is the wheel of the pin `name==version`."""
    return wheel_version(filename) == (canonicalize_name(name), Version(version))


def wheel_version(filename: str) -> tuple | None:
    """(canonical distribution name, Version) of a wheel file name, or None when it is not one (a name that is not a
    plain file name is none: packaging alone accepts a newline in the tags)."""
    if file_name_problem(filename):
        return None
    try:
        dist, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return canonicalize_name(dist), version


def stage_name(name: str) -> str:
    return STAGE_PREFIX + name.replace("_", "-")


def prebuilt_choice(step: dict, artifacts: dict, wheels=()) -> dict | None:
    """How a step with `prebuilt: NAME` is built: {"how": "wheels", "file"} from `--source wheels=DIR`,
    {"how": "artifact", "name", "file"} from the lock, or {"how": "source"} while the artifact is pending."""
    name = step.get("prebuilt")
    if name is None:
        return None
    record = artifacts[name]
    dist = wheel_dist(file_name(record))
    for wheel in wheels:
        if wheel_dist(wheel) is None:  # toolkit/plan/wheel_files.py refuses it first; a render never drops it
            raise UsageError(f"--source wheels: {short(wheel)} is not a plain wheel file name; refusing to render")
        if wheel_dist(wheel) == dist:
            return {"how": WHEELS, "file": wheel}
    if not is_pending(record):
        return {"how": "artifact", "name": name, "file": file_name(record)}
    return {"how": "source", "pending": name}


def stages(steps: list, artifacts: dict) -> list[dict]:
    """The fetch stage of every locked artifact a rendered step reads (steps as toolkit.steps views them), once."""
    names: list[str] = []
    for step in steps:
        for name in step.get("reads_artifacts", ()):
            if name not in names:
                names.append(name)
    return [
        {
            "stage": stage_name(n),
            "sha256": artifacts[n]["sha256"],
            "url": artifacts[n]["url"],
            "file": file_name(artifacts[n]),
        }
        for n in names
    ]


def build_labels(steps: list) -> dict:
    """`io.miles.build.<NAME>`: for each step with `prebuilt`, what was installed (steps as views)."""
    out = {}
    for step in steps:
        choice = step.get("choice")
        if choice is None:
            continue
        if choice["how"] == WHEELS:
            text = f"prebuilt wheel {choice['file']} from --source wheels"
        elif choice["how"] == "artifact":
            text = f"prebuilt wheel {choice['file']} (artifact {choice['name']})"
        else:
            text = f"built from source (artifact {choice['pending']} is pending in the lock)"
        out[BUILD_LABEL_PREFIX + step["target"]] = text
    return out
