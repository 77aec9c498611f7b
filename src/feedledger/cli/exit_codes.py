"""The `feedledger` command's exit codes: one table, the CLI's business (the library's
errors carry none). README's exit-code list says the same (a test compares them)."""

from __future__ import annotations

from feedledger.model.errors import (
    ArchiveUnavailableError,
    BadPayloadError,
    ConfigError,
    FeedledgerError,
    FetchError,
    LeaseHeldError,
    MassDeleteError,
    NotFoundError,
    RetractConflictError,
    SourceFrozenError,
    StaleWatermarkError,
    StoreUnavailableError,
)

# (error class, exit code), most specific first: an error exits with the code of the
# first class it is an instance of; any other FeedledgerError with GENERAL.
EXIT_CODES: list[tuple[type[FeedledgerError], int]] = [
    (ConfigError, 2),  # feedledger.toml or a command-line value (FutureDateError, InGap)
    (NotFoundError, 3),  # an unknown source, run, payload or key (SourceNotFound)
    (BadPayloadError, 4),  # the payload cannot be read (AmbiguousPayloadError)
    (MassDeleteError, 5),
    (StaleWatermarkError, 6),
    (LeaseHeldError, 7),
    (StoreUnavailableError, 8),
    (ArchiveUnavailableError, 8),
    (SourceFrozenError, 9),
    (RetractConflictError, 10),
    (FetchError, 11),
]
GENERAL = 1


def exit_code(error: FeedledgerError) -> int:
    """The exit code of `error` (EXIT_CODES)."""
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    return GENERAL
