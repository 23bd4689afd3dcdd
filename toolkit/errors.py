"""Errors that map to the CLI's documented exit codes (README "Exit codes", docs/architecture.md)."""

MAX_ECHO = 80  # characters of an offending value an error repeats: enough to recognise it, never megabytes
MAX_LINE = 400


def short(value, limit: int = MAX_ECHO, quote: bool = True) -> str:
    """`value` as an error message may echo it: repr'd (so one line, control characters visible), cut to `limit`."""
    text = repr(value) if quote else str(value).encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ToolkitError(Exception):
    exit_code = 1


class BuildFailed(ToolkitError):
    """The build or one of its gates failed."""

    exit_code = 1


class UsageError(ToolkitError):
    """Bad command line, unknown target or bad spec: nothing was built or written."""

    exit_code = 2


class Interrupted(ToolkitError):
    """SIGINT or SIGTERM: the build child was stopped and cleaned up; exit 128 + the signal number."""

    def __init__(self, signum: int):
        import signal

        self.signum, self.exit_code = signum, 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: stopped, nothing was tagged or written")


class SpecError(UsageError):
    """A spec file is invalid; the message is `FILE: KEY.PATH: problem`."""

    def __init__(self, file, key, problem):
        self.file, self.key, self.problem = file, key, problem
        where = f"{file}: {key}: " if key else f"{file}: "
        super().__init__(short(where + problem, MAX_LINE, quote=False))


class EngineUnavailable(ToolkitError):
    """No Docker engine (or no buildx) answers."""

    exit_code = 3
