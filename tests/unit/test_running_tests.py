"""tests/running_tests.py: the test run's heartbeat names the longest-running test after a quiet spell, starts a
new line after dots, and a printed result restarts the quiet (a fake clock, a pipe for the terminal)."""

import os
import types

from running_tests import HeartbeatPlugin


class Clock:
    def __init__(self, now=500.0):
        self.now = now

    def __call__(self):
        return self.now


def _report(when="call", passed=True):
    return types.SimpleNamespace(when=when, passed=passed)


def _read(fd):
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536).decode()
    except BlockingIOError:
        return ""


def test_the_longest_running_test_is_named_after_ten_quiet_seconds_on_a_line_of_its_own():
    clock, (r, w) = Clock(), os.pipe()
    plugin = HeartbeatPlugin(w, clock=clock)
    try:
        plugin.pytest_runtest_logstart("tests/test_a.py::test_long", None)
        clock.now += 3
        plugin.pytest_runtest_logstart("tests/test_b.py::test_other", None)
        plugin.pytest_runtest_logreport(_report())  # a dot: the next heartbeat starts a new line
        clock.now += 9
        assert plugin.beat.tick() is None and _read(r) == ""
        clock.now += 1
        assert plugin.beat.tick() == "  … tests/test_a.py::test_long (and 1 more) still running (13 s)"
        assert _read(r) == "\n  … tests/test_a.py::test_long (and 1 more) still running (13 s)\n"
        plugin.pytest_runtest_logfinish("tests/test_a.py::test_long", None)
        clock.now += 12
        assert plugin.beat.tick() == "  … tests/test_b.py::test_other still running (22 s)"
        assert _read(r) == "  … tests/test_b.py::test_other still running (22 s)\n"  # no blank line between beats
    finally:
        os.close(r)
        plugin.pytest_unconfigure(None)


def test_the_collection_before_the_first_test_gets_a_heartbeat_too():
    clock, (r, w) = Clock(), os.pipe()
    plugin = HeartbeatPlugin(w, clock=clock)
    try:
        clock.now += 10
        assert plugin.beat.tick() == "  … test collection still running (10 s)"
    finally:
        os.close(r)
        plugin.pytest_unconfigure(None)


def test_a_printed_result_restarts_the_quiet_and_no_running_test_means_no_line():
    clock, (r, w) = Clock(), os.pipe()
    plugin = HeartbeatPlugin(w, clock=clock)
    try:
        plugin.pytest_runtest_logstart("tests/test_a.py::test_one", None)
        clock.now += 8
        plugin.pytest_runtest_logreport(_report(when="setup"))  # prints nothing, but it is news of the run
        clock.now += 8
        assert plugin.beat.tick() is None
        plugin.pytest_runtest_logfinish("tests/test_a.py::test_one", None)
        clock.now += 60
        assert plugin.beat.tick() is None and _read(r) == ""
    finally:
        os.close(r)
        plugin.pytest_unconfigure(None)
