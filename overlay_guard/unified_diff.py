"""A strict reader of unified diffs (git format and plain ``diff -u``) that keeps what the overlay guard judges:
per hunk the header counts, the body counts and the number of context lines; per file the paths, modes and
whether it is binary. It never guesses a hunk's extent from anything but the header counts, like ``git apply``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEV_NULL = "/dev/null"


@dataclass
class Hunk:
    index: int  # 1-based, counted over the whole patch file
    line: int  # line number of the @@ header in the patch file
    header: str
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    context: int = 0
    removed: int = 0
    added: int = 0
    overflow: int = 0  # body lines past what the header announced

    @property
    def body_old(self) -> int:
        return self.context + self.removed

    @property
    def body_new(self) -> int:
        return self.context + self.added

    @property
    def counts_agree(self) -> bool:
        return self.body_old == self.old_count and self.body_new == self.new_count and not self.overflow


@dataclass
class FilePatch:
    line: int  # first header line in the patch file
    is_git: bool
    old_path: str | None = None
    new_path: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    new_file_mode: str | None = None
    deleted_file_mode: str | None = None
    rename_from: str | None = None
    rename_to: str | None = None
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def creates(self) -> bool:
        return self.new_file_mode is not None or self.old_path == DEV_NULL

    @property
    def deletes(self) -> bool:
        return self.deleted_file_mode is not None or self.new_path == DEV_NULL

    @property
    def display_path(self) -> str:
        for p in (self.new_path, self.old_path):
            if p and p != DEV_NULL:
                return strip_prefix(p, self.is_git)
        return "?"


@dataclass
class Malformed:
    line: int
    problem: str


@dataclass
class Diff:
    files: list[FilePatch] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)


def _unquote(path: str) -> str:
    """git C-quotes odd paths: "a/sp\\303\\251cial"; decode the common escapes."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        try:
            return raw.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return raw
    return path


def _header_path(text: str) -> str:
    """Path of a ``---``/``+++`` line: drop the tab-separated timestamp that diff -u adds."""
    text = text.split("\t", 1)[0].rstrip("\r")
    return _unquote(text.strip()) if text.strip().startswith('"') else text.rstrip()


def strip_prefix(path: str, is_git: bool) -> str:
    """git's ``a/``/``b/`` prefixes are not part of the tree path (as ``git apply``'s default -p1)."""
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


def _git_paths(rest: str) -> list[str | None]:
    rest = rest.rstrip("\r")
    if rest.startswith('"'):
        m = re.match(r'^("(?:[^"\\]|\\.)*")\s+(.*)$', rest)
        if m:
            return [_unquote(m.group(1)), _unquote(m.group(2))]
    if rest.startswith("a/") and " b/" in rest:
        i = rest.index(" b/")
        return [rest[:i], rest[i + 1 :]]
    half = len(rest) // 2
    if len(rest) % 2 == 1 and rest[:half] == rest[half + 1 :]:
        return [rest[:half], rest[half + 1 :]]
    parts = rest.split(" ", 1)
    return [parts[0], parts[1] if len(parts) > 1 else None]


def _is_file_start(lines: list[str], i: int) -> bool:
    return lines[i].startswith("diff --git ") or (
        lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
    )


def _git_header(lines: list[str], i: int, fp: FilePatch) -> int:
    """Consume git's extended header lines after ``diff --git``; return the index of the first line after them."""
    n = len(lines)
    while i < n:
        ln = lines[i].rstrip("\r")
        if ln.startswith("diff --git ") or ln.startswith("@@"):
            return i
        if ln.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            fp.old_path, fp.new_path = _header_path(ln[4:]), _header_path(lines[i + 1][4:])
            return i + 2
        for key, attr in (
            ("old mode ", "old_mode"),
            ("new mode ", "new_mode"),
            ("new file mode ", "new_file_mode"),
            ("deleted file mode ", "deleted_file_mode"),
            ("rename from ", "rename_from"),
            ("rename to ", "rename_to"),
            ("copy from ", "rename_from"),
            ("copy to ", "rename_to"),
        ):
            if ln.startswith(key):
                setattr(fp, attr, ln[len(key) :].strip())
                break
        else:
            if ln.startswith("GIT binary patch") or (ln.startswith("Binary files ") and ln.endswith(" differ")):
                fp.binary = True
            elif not ln.startswith(("index ", "similarity index ", "dissimilarity index ")):
                return i  # anything else ends the header (e.g. the next commit's text)
        i += 1
    return i


def _read_hunk(lines: list[str], i: int, hunk: Hunk) -> int:
    """Count the body exactly as the header announces it; then note any surplus hunk-like lines."""
    n = len(lines)
    old_left, new_left = hunk.old_count, hunk.new_count
    while i < n and (old_left > 0 or new_left > 0):
        ln = lines[i].rstrip("\r")
        c = ln[:1]
        if c == " " or ln == "":
            hunk.context += 1
            old_left, new_left = old_left - 1, new_left - 1
        elif c == "-":
            hunk.removed += 1
            old_left -= 1
        elif c == "+":
            hunk.added += 1
            new_left -= 1
        elif c == "\\":
            pass
        else:
            break
        i += 1
    while i < n and lines[i].startswith("\\"):
        i += 1
    while i < n and lines[i][:1] in (" ", "+", "-") and not _is_file_start(lines, i) and lines[i].rstrip("\r") != "-- ":
        hunk.overflow += 1
        i += 1
    return i


def parse(text: str) -> Diff:
    """Parse every file section and hunk; text that is neither is skipped (mail headers, commit messages)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    diff = Diff()
    current: FilePatch | None = None
    hunk_no = 0
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("diff --git "):
            current = FilePatch(line=i + 1, is_git=True)
            current.old_path, current.new_path = _git_paths(ln[len("diff --git ") :])
            diff.files.append(current)
            i = _git_header(lines, i + 1, current)
        elif _is_file_start(lines, i):
            current = FilePatch(line=i + 1, is_git=False)
            current.old_path, current.new_path = _header_path(ln[4:]), _header_path(lines[i + 1][4:])
            diff.files.append(current)
            i += 2
        elif ln.startswith("@@"):
            hunk_no += 1
            m = _HUNK_RE.match(ln)
            if current is None or m is None:
                why = "hunk header without a file header" if m else "unparsable hunk header %r" % ln[:80]
                diff.malformed.append(Malformed(i + 1, why))
                i += 1
                continue
            a, b, c, d = m.groups()
            hunk = Hunk(
                hunk_no, i + 1, m.group(0), int(a), 1 if b is None else int(b), int(c), 1 if d is None else int(d)
            )
            current.hunks.append(hunk)
            i = _read_hunk(lines, i + 1, hunk)
        else:
            i += 1
    return diff
