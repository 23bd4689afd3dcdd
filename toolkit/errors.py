"""Errors that map to the CLI's documented exit codes (README, docs/architecture.md)."""


class ToolkitError(Exception):
    exit_code = 1


class BuildFailed(ToolkitError):
    """The build or one of its gates failed."""

    exit_code = 1


class UsageError(ToolkitError):
    """Bad command line, unknown target or bad spec: nothing was built or written."""

    exit_code = 2


class SpecError(UsageError):
    """A spec file is invalid; the message is `FILE: KEY.PATH: problem`."""

    def __init__(self, file, key, problem):
        self.file, self.key, self.problem = file, key, problem
        where = f"{file}: {key}: " if key else f"{file}: "
        super().__init__(where + problem)


class EngineUnavailable(ToolkitError):
    """No Docker engine (or no buildx) answers."""

    exit_code = 3
