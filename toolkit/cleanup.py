"""One clean-up scope per command: everything a build creates on the host is removed however the command ends.

A folder is registered the moment it is created (staging, unpacked `--source` trees, a debootstrap root, a partial
wheelhouse download), not when the function that made it returns, so a signal or an error halfway through
leaves nothing behind. While the scope removes what it holds, SIGINT and SIGTERM are held off: a second signal
cannot cut the clean-up short. A debootstrap root can hold mounts (proc, sys, bound device nodes); they are
detached before anything under them is removed, so removal never reaches into the host's /proc, /sys or /dev.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held():
    """Run the body with SIGINT/SIGTERM recorded instead of acted on; afterwards the first one recorded gets the
    handler it would have had, unless an exception is already on its way out (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = []
    previous = {s: signal.signal(s, lambda signum, frame: seen.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if seen:  # now the signal does what it would have done: the caller's handler runs (build.py's raises)
        handler = previous[seen[0]]
        if callable(handler):
            handler(seen[0], None)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(seen[0])


def mounts_under(path: Path) -> list:
    """Mount points at or below `path`, deepest first (from /proc/self/mountinfo; octal escapes decoded)."""
    root = str(Path(path).resolve())
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """Detach any mount below `path`, then remove it. Never raises: clean-up must not hide the real error."""
    for point in mounts_under(path):
        subprocess.run(["umount", "--lazy", point], capture_output=True)
    if mounts_under(path):  # a mount that would not detach: leave the folder rather than delete through it
        return
    shutil.rmtree(path, ignore_errors=True)


class Scope:
    """The folders one command has created so far; `close` removes those that still exist (a folder renamed into
    its final place, a kept bake context say, is simply gone from where it was registered)."""

    def __init__(self):
        self._paths: list[Path] = []

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def track(self, path) -> Path:
        path = Path(path)
        self._paths.append(path)
        return path

    def mkdtemp(self, prefix: str, parent) -> Path:
        """A new private folder under `parent` (made when missing), registered before anyone writes into it."""
        Path(parent).mkdir(parents=True, exist_ok=True)
        with signals_held():  # between mkdtemp and track a signal would orphan the folder
            return self.track(tempfile.mkdtemp(prefix=prefix, dir=parent))

    def remove(self, path) -> None:
        """Remove one registered folder now (a debootstrap root once imported), signals held."""
        path = Path(path)
        with signals_held():
            remove_tree(path)
            self._paths = [p for p in self._paths if p != path]

    def close(self) -> None:
        with signals_held():
            while self._paths:
                remove_tree(self._paths.pop())


@contextlib.contextmanager
def scope_or_own(scope: Scope | None):
    """`scope` when the caller has one, else a scope of this block's own, closed when the block ends."""
    if scope is not None:
        yield scope
        return
    with Scope() as own:
        yield own
