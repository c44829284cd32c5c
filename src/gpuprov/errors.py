"""Errors a user can cause, and the exit codes they end with.

Every failure that is not a bug in gpuprov is raised as a GpuprovError; the CLI prints its message as one
line and exits with its code. The codes are documented in docs/exit-codes.md.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILURE = 1  # the operation ran and failed (e.g. a container did not come up)
    BAD_INPUT = 2  # an option, argument or file the user gave is wrong
    ENVIRONMENT = 3  # this machine lacks something: Docker engine, a host tool, permissions
    CONFLICT = 4  # something that gpuprov did not make is in the way (a container or network name)
    HOSTS_FAILED = 5  # bootstrap: a task failed on at least one host
    HOSTS_UNREACHABLE = 6  # bootstrap, launch, logs: at least one host could not be reached
    PREFLIGHT_FAILED = 7  # bootstrap, launch: preflight found a host not ready; nothing was applied/started
    CHECK_COULD_NOT_RUN = 8  # check: a check could not run (tool missing, timeout) and none failed
    INTERRUPTED = 130  # Ctrl-C


class GpuprovError(Exception):
    """A failure with a message fit for one line of output and a documented exit code."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


class BadInput(GpuprovError):
    exit_code = ExitCode.BAD_INPUT


class EnvironmentProblem(GpuprovError):
    exit_code = ExitCode.ENVIRONMENT


class Conflict(GpuprovError):
    exit_code = ExitCode.CONFLICT


class Finished(GpuprovError):
    """The command has reported its outcome itself (check's results): only the exit code is left to give,
    with no error line (a command never calls sys.exit; gpuprov.cli.main does)."""

    def __init__(self, exit_code: ExitCode) -> None:
        super().__init__("", exit_code)
