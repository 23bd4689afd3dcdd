"""Bounds on every engine call after the ping: an engine that accepted and then stopped answering is exit 3 with
one line naming the call, never a silent wait.

API requests (inspect, tag, create, push, ...) wait at most MILES_ENGINE_TIMEOUT seconds (default 120) for each
answer; streams (push, container logs) for each next message. `docker import` has IMPORT_TIMEOUT in all; every
buildx call but a build (the probe, `engine.buildx`) the engine timeout, unless it names its own (a registry
lookup's). A build may run for hours, but BuildKit must start its first step within the engine timeout: before
that, nothing has begun on the engine, so the client is stopped at once.
"""

from __future__ import annotations

import os
import re
import signal
import threading

from toolkit.errors import EngineUnavailable, short
from toolkit.strict import MAX_SECONDS, env_whole

DEFAULT_ENGINE_TIMEOUT = 120
IMPORT_TIMEOUT = 1800  # seconds for `docker import` of a base image or a wheelhouse (gigabytes, on a busy disk)
MAX_ENGINE_TIMEOUT = MAX_SECONDS  # a day
HINT = "is the engine overloaded or stuck? (MILES_ENGINE_TIMEOUT raises the bound)"


def engine_timeout() -> int:
    """MILES_ENGINE_TIMEOUT: 1 to MAX_ENGINE_TIMEOUT seconds in ASCII digits (toolkit/strict.py)."""
    return env_whole("MILES_ENGINE_TIMEOUT", DEFAULT_ENGINE_TIMEOUT, MAX_ENGINE_TIMEOUT, unit="of seconds")


def unanswered(call: str, seconds: float) -> EngineUnavailable:
    return EngineUnavailable(f"the engine accepted {call} and sent no answer within {seconds:.0f}s; {HINT}")


def as_engine_error(error: BaseException) -> EngineUnavailable | None:
    """An SDK request that timed out or lost its connection (requests' exceptions carry the request), as exit 3
    naming the call (`GET /images/NAME/json`); None for anything else."""
    try:
        import requests
    except ImportError:
        return None
    if not isinstance(error, (requests.exceptions.Timeout, requests.exceptions.ConnectionError)):
        return None
    request = getattr(error, "request", None)
    path = re.sub(r"^/v[0-9.]+/", "/", getattr(request, "path_url", "") or "")
    call = f"`{request.method} {short(path, 120, quote=False)}`" if request is not None else "a request"
    if isinstance(error, requests.exceptions.Timeout):  # a call with its own bound (container wait) names it
        bound = re.search(r"read timeout=([0-9.]+)", str(error))
        return unanswered(call, float(bound.group(1)) if bound else engine_timeout())
    return EngineUnavailable(f"the engine dropped the connection during {call}; {HINT}")


class FirstStep:
    """Watches a `docker buildx build` child: unless BuildKit starts a step (`#1 ...`) within the engine timeout,
    the child's process group is killed and `expired` is set (nothing was started on the engine to cancel)."""

    STEP_RE = re.compile(r"^#[1-9][0-9]* ")

    def __init__(self, proc):
        self.seconds = engine_timeout()
        self.expired = False
        self._timer = threading.Timer(self.seconds, self._expire, args=(proc,))
        self._timer.daemon = True
        self._timer.start()

    def _expire(self, proc) -> None:
        self.expired = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def seen(self, line: str) -> None:
        if self.STEP_RE.match(line):
            self._timer.cancel()

    def done(self) -> None:
        self._timer.cancel()
