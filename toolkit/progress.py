"""Progress a user can see during the long, quiet parts of a build: nothing is silent for more than ~15 s, and the
log stays short (one line per event, never a redrawn bar: fine in a CI log).

- ``Heartbeat``: when nothing was printed for QUIET seconds, one line saying what is still running, then one every
  EVERY seconds while it stays quiet. ``ticking`` calls its ``tick`` from a thread until the work ends.
- ``BuildKitSteps``: which BuildKit steps are running, from BuildKit's own plain progress lines (``#12 [stage 3/9]
  RUN ...``), for the heartbeat of `docker buildx build` (toolkit/engine/docker_engine.py).
- ``DebootstrapLines``: debootstrap's ``I: Retrieving ...`` stream, one line per stage (toolkit/engine/base_image.py).
- ``PipDownloadLines``: `pip download`'s stream, as ``wheelhouse: 37/120 files, 1.2 GB`` (toolkit/plan/wheelhouse.py).

Every class takes its clock (``time.monotonic`` by default) so the tests drive them with a fake one.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator

QUIET = 10.0  # seconds without a printed line before the first heartbeat
EVERY = 12.0  # seconds between heartbeats while it stays quiet (with the tick, no gap over ~13 s)
TICK = 1.0  # seconds between the ticker thread's looks


class Heartbeat:
    """Prints through ``say`` (which notes the time) and, on ``tick``, a heartbeat when nothing was said for
    ``quiet`` seconds: ``  … WHAT still running (42 s)``, WHAT and its start time from ``describe()`` (None: say
    nothing), then again every ``every`` seconds while nothing else is said. ``say`` and ``tick`` may be called
    from different threads."""

    def __init__(self, out, describe: Callable[[], tuple | None], clock=time.monotonic, quiet=None, every=None):
        self.out, self.describe, self.clock = out, describe, clock
        self.quiet = QUIET if quiet is None else quiet  # the module's values, read now (a test may set them)
        self.every = EVERY if every is None else every
        self.lock = threading.RLock()
        self.last_said = clock()
        self.last_beat: float | None = None

    def say(self, line: str) -> None:
        with self.lock:
            self.out(line)
            self.heard()

    def heard(self) -> None:
        """Something else was printed just now (a test's progress dot, say): the quiet starts again."""
        with self.lock:
            self.last_said, self.last_beat = self.clock(), None

    def tick(self) -> str | None:
        """The heartbeat line printed now, or None."""
        with self.lock:
            now = self.clock()
            if now - self.last_said < self.quiet:
                return None
            if self.last_beat is not None and now - self.last_beat < self.every:
                return None
            found = self.describe()
            if found is None:
                return None
            what, since = found
            line = f"  … {what} still running ({now - since:.0f} s)"
            self.out(line)
            self.last_beat = now
            return line


@contextlib.contextmanager
def ticking(beat: Heartbeat, interval: float | None = None, name: str = "heartbeat") -> Iterator[Heartbeat]:
    """Call ``beat.tick()`` every ``interval`` seconds from a daemon thread (``name``) while the block runs; the
    thread is stopped and joined when the block ends, however it ends."""
    stop = threading.Event()
    seconds = TICK if interval is None else interval

    def run() -> None:
        while not stop.wait(seconds):
            beat.tick()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield beat
    finally:
        stop.set()
        thread.join()


# ---- BuildKit


# `#0 building with "default" instance ...` is buildx's own preamble, not a step: it never ends, so it is not one.
STEP_LINE = re.compile(r"^#([1-9]\d*) (.*)$")


class BuildKitSteps:
    """The running BuildKit steps, from its plain progress lines: ``#N NAME`` starts step N, ``#N DONE 1.2s``,
    ``#N CACHED`` and ``#N ERROR ...`` end it. ``describe`` names the longest-running named step (``[stage 3/9]
    RUN ...``; BuildKit's own, ``[internal] load metadata ...``, only when no other runs), for the heartbeat."""

    def __init__(self, clock=time.monotonic, width: int = 100):
        self.clock, self.width = clock, width
        self.running: dict[str, tuple[str, float]] = {}  # step id -> (name, started)
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def feed(self, line: str) -> None:
        m = STEP_LINE.match(line.rstrip("\n"))
        if not m:
            return
        sid, rest = m.groups()
        with self.lock:
            if sid not in self.seen:
                self.seen.add(sid)
                self.running[sid] = (" ".join(rest.split()), self.clock())
            elif rest.startswith(("DONE ", "ERROR")) or rest == "CACHED":
                self.running.pop(sid, None)

    def describe(self) -> tuple | None:
        with self.lock:
            running = [(since, name) for name, since in self.running.values()]
            named = [(since, name) for since, name in running if name.startswith("[") and "[internal]" not in name]
            named = named or running  # BuildKit's own steps (loading metadata, say) only when nothing else runs
            if not named:
                return None
            since, name = min(named)
            more = len(named) - 1
        name = name if len(name) <= self.width else name[: self.width - 1] + "…"
        return (name + (f" (and {more} more)" if more else ""), since)


# ---- debootstrap

DEBOOTSTRAP_LINE = re.compile(r"^I: (\S+)\s*(.*)$")


class DebootstrapLines:
    """debootstrap's output, condensed: a line for each new stage (the first word of an ``I:`` line: Retrieving,
    Validating, Extracting, Unpacking, Configuring, ...), at most one more every ``every`` seconds while a stage
    goes on, and ``(N lines)`` when a stage of several lines ends; ``W:``/``E:`` lines as they are. ``tail`` keeps
    the last lines of all of it, for the error of a failed run. ``describe`` names the stage, for a heartbeat."""

    def __init__(self, say, clock=time.monotonic, every: float = 5.0, keep: int = 20):
        self.say, self.clock, self.every = say, clock, every
        self.tail: collections.deque = collections.deque(maxlen=keep)
        self.verb: str | None = None
        self.count = 0
        self.shown_at = 0.0
        self.started = clock()
        self.last = ""

    def feed(self, line: str) -> None:
        line = line.rstrip()
        self.tail.append(line)
        m = DEBOOTSTRAP_LINE.match(line)
        now = self.clock()
        if not m:
            if line.startswith(("W:", "E:")):
                self.say(f"  debootstrap: {line}")
            return
        verb = m.group(1)
        self.last = line
        if verb != self.verb:
            self.close()
            self.verb, self.count, self.started = verb, 1, now
            self.say(f"  debootstrap: {line}")
            self.shown_at = now
            return
        self.count += 1
        if now - self.shown_at >= self.every:
            self.say(f"  debootstrap: {line} ({self.count} {verb} lines so far)")
            self.shown_at = now

    def close(self) -> None:
        """The end of the current stage (a new one starts, or debootstrap ended)."""
        if self.verb is not None and self.count > 1:
            self.say(f"  debootstrap: {self.verb}: {self.count} lines")
        self.verb, self.count = None, 0

    def describe(self) -> tuple | None:
        return (f"debootstrap ({self.last[3:] or 'starting'})", self.started)


# ---- pip download

PIP_GOT = re.compile(r"^\s*(?:Downloading|Using cached)\s+(\S+)(?:\s+\(([\d.]+)\s*(bytes|kB|MB|GB)\))?")
PIP_HAD = re.compile(r"^\s*File was already downloaded\s+(\S+)")
UNITS = {"bytes": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}


def human(size: float) -> str:
    for unit in ("GB", "MB", "kB"):
        if size >= UNITS[unit]:
            return f"{size / UNITS[unit]:.1f} {unit}"
    return f"{size:.0f} bytes"


class PipDownloadLines:
    """`pip download`'s output (``Collecting X``, ``Downloading X (906.4 MB)``, ``Using cached X (12 kB)``, ``File
    was already downloaded PATH``, ``Saved PATH``), condensed to ``  wheelhouse: 37/120 files, 1.2 GB (NAME)``: the
    first file, then at most one line every ``every`` seconds, and the last count from ``close``. ``tail`` keeps
    the last lines, for the error of a failed run; ``describe`` names the file being fetched, for a heartbeat."""

    def __init__(self, say, total: int | None = None, clock=time.monotonic, every: float = 5.0, keep: int = 15):
        self.say, self.total, self.clock, self.every = say, total, clock, every
        self.tail: collections.deque = collections.deque(maxlen=keep)
        self.files, self.bytes = 0, 0.0
        self.shown_at: float | None = None
        self.shown_files = 0
        self.current: tuple | None = None  # (file name, since)

    def count(self) -> str:
        of = f"/{self.total}" if self.total else ""
        return f"{self.files}{of} files, {human(self.bytes)}"

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if line.strip():
            self.tail.append(line)
        now = self.clock()
        got, had = PIP_GOT.match(line), PIP_HAD.match(line)
        if got:
            name = os.path.basename(got.group(1))
            if got.group(2):
                self.bytes += float(got.group(2)) * UNITS[got.group(3)]
        elif had:
            name = os.path.basename(had.group(1))
            with contextlib.suppress(OSError):
                self.bytes += os.path.getsize(had.group(1))
        else:
            return
        self.files += 1
        self.current = (f"wheelhouse: {name}", now)
        if self.shown_at is None or now - self.shown_at >= self.every:
            self.say(f"  wheelhouse: {self.count()} ({name})")
            self.shown_at, self.shown_files = now, self.files

    def close(self) -> None:
        if self.files != self.shown_files:
            self.say(f"  wheelhouse: {self.count()}")
            self.shown_files = self.files

    def describe(self) -> tuple | None:
        return self.current
