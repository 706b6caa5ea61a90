"""Typed errors. Every user-facing failure is a `CceError` with a human message;
the CLI turns them into `error: {message}` on stderr and an exit code in one place."""

from __future__ import annotations


class CceError(Exception):
    """A refused or failed operation. Exit code 1 unless a subclass says otherwise."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(CceError):
    """Bad command-line usage (exit 2, like argparse's own errors)."""

    exit_code = 2


class ContractError(CceError):
    """Input that violates a contract (feed, manifest, ask suite)."""


class ConfigError(CceError):
    """A configuration problem the user must fix: a usage error (exit 2), like a bad
    flag, since the command never started its work."""

    exit_code = 2


class ConfigRefused(ConfigError):
    """A config file refused outright, unread: nested too deeply, an alias bomb, a
    numeral thousands of digits long (exit 2: the invocation cannot run as set up)."""

    exit_code = 2


class StoreError(CceError):
    """A knowledge store that is missing, unreadable or corrupt."""


class SyncError(CceError):
    """A failure talking to, or verifying data from, the git cache."""


class ExtractError(CceError):
    """An adapter could not produce a feed."""


class RateLimitStop(ExtractError):
    """An API's rate limit would outlast the allowed wait: the run stopped cleanly and
    the next run resumes (exit 3, so a scheduler can tell it from a failure)."""

    exit_code = 3
