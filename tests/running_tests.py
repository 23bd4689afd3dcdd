"""The test run's heartbeat: a test (or two, under xdist) that runs long prints no dot for a minute, so after
QUIET seconds without output the run says which test is still running, then again every EVERY seconds
(toolkit/progress.py's Heartbeat, as the builds use). Only the process that prints keeps one: xdist's controller,
to which xdist forwards its workers' logstart and logfinish, or the one process under -n0. tests/conftest.py
registers it."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from toolkit.progress import Heartbeat, ticking


class RunningTests:
    """Which tests run now; ``describe`` names the longest-running one, for the heartbeat."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.running: dict[str, float] = {}
        self.began, self.any_started = clock(), False  # before the first test: the collection (in xdist's workers)
        self.lock = threading.Lock()

    def start(self, nodeid: str) -> None:
        with self.lock:
            self.running[nodeid], self.any_started = self.clock(), True

    def finish(self, nodeid: str) -> None:
        with self.lock:
            self.running.pop(nodeid, None)

    def describe(self) -> tuple | None:
        with self.lock:
            if not self.running:
                return None if self.any_started else ("test collection", self.began)
            nodeid, since = min(self.running.items(), key=lambda kv: kv[1])
            others = len(self.running) - 1
            return (nodeid + (f" (and {others} more)" if others else ""), since)


class HeartbeatPlugin:
    """pytest hooks: note each test's start and end, and each printed result; a ticker thread beats meanwhile.
    It writes to its own copy of the terminal's descriptor, which pytest's capture of a running test (under -n0)
    does not redirect; after dots it starts a new line."""

    def __init__(self, fd: int, clock=time.monotonic):
        self.fd, self.after_dots = fd, False
        self.tests = RunningTests(clock)
        # Every 10 s, not the builds' 12: a loaded machine delays the ticker a few seconds, and 15 s is the limit.
        self.beat = Heartbeat(self.write_line, self.tests.describe, clock=clock, every=10.0)
        self.stack = contextlib.ExitStack()

    def write_line(self, line: str) -> None:
        os.write(self.fd, (("\n" if self.after_dots else "") + line + "\n").encode())
        self.after_dots = False

    def pytest_sessionstart(self, session):
        self.stack.enter_context(ticking(self.beat, name="test-run-heartbeat"))

    def pytest_sessionfinish(self, session):
        self.stack.close()

    def pytest_unconfigure(self, config):
        os.close(self.fd)

    def pytest_runtest_logstart(self, nodeid, location):
        self.tests.start(nodeid)

    def pytest_runtest_logfinish(self, nodeid, location):
        self.tests.finish(nodeid)

    def pytest_runtest_logreport(self, report):
        with self.beat.lock:
            self.after_dots = self.after_dots or report.when == "call" or not report.passed
            self.beat.heard()  # a result was printed (a dot, a letter): the quiet starts again


def register(config) -> None:
    """Add the heartbeat to this run, unless this process is an xdist worker or prints no progress."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if hasattr(config, "workerinput") or terminal is None:
        return
    sys.stdout.flush()
    plugin = HeartbeatPlugin(os.dup(sys.__stdout__.fileno()))  # the terminal, before any test's capture
    config.pluginmanager.register(plugin, "running-tests-heartbeat")
