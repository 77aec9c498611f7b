"""Error hierarchy. Every error names the source, the payload and the problem where known.

The CLI prints `str(error)` as one line and exits with its code (cli/exit_codes.py);
the server answers its problem response (server/problems.py).
"""

from __future__ import annotations


class FeedledgerError(Exception):
    """Base class: a clear, user-facing problem (never a bug)."""

    def __init__(
        self,
        problem: str,
        *,
        source: str | None = None,
        payload: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = source
        self.payload = payload
        self.hint = hint
        super().__init__(self.render())

    def extend(self, more: str) -> FeedledgerError:
        """This error with `more` added to its problem (still one line); returns it, to
        re-raise: `raise exc.extend("the bytes are kept at PATH")`."""
        self.problem = f"{self.problem}; {more}"
        self.args = (self.render(),)
        return self

    def render(self) -> str:
        where = []
        if self.source is not None:
            where.append(f"source {self.source!r}")
        if self.payload is not None:
            where.append(f"payload {self.payload}")
        text = (", ".join(where) + ": " if where else "") + self.problem
        if self.hint:
            text += f" ({self.hint})"
        return text


class ConfigError(FeedledgerError):
    """feedledger.toml or a command-line value is invalid."""


class FutureDateError(ConfigError):
    """A publisher date more than a day after now (refused unless --allow-future);
    `published_at`: that date (us UTC)."""

    published_at: int | None = None


class NotFoundError(FeedledgerError):
    """An unknown source, run, payload or key."""


class BadPayloadError(FeedledgerError):
    """The payload cannot be read or violates the source's contract (keys, encoding...)."""


class AmbiguousPayloadError(BadPayloadError):
    """Two different payloads claim the same publisher timestamp for one source."""


class MassDeleteError(FeedledgerError):
    """A snapshot would delete more than the allowed share of live entities."""


class StaleWatermarkError(FeedledgerError):
    """The payload is not after the source's watermark (publisher order would break).
    `published_at`: the publisher date a portal stated, when known (us UTC)."""

    published_at: int | None = None


class LeaseHeldError(FeedledgerError):
    """Another run holds the source's lease."""


class StoreUnavailableError(FeedledgerError):
    """The store URL cannot be reached or its schema is not at the expected revision."""


class SchemaTooNewError(StoreUnavailableError):
    """The store's schema was upgraded past what this feedledger can run against (its
    floor is a revision this release does not know): upgrade this machine's feedledger."""


class UpgradeBlockedError(LeaseHeldError):
    """`db upgrade` refused: a pending migration is incompatible with the schema of a
    release that holds a live lease (docs/upgrading.md)."""


class ArchiveUnavailableError(FeedledgerError):
    """The archive's object store cannot be used: unreachable, no bucket, no credentials."""


class SourceFrozenError(FeedledgerError):
    """The source is frozen: live runs are refused (backfill, replay, retract allowed)."""


class RetractConflictError(FeedledgerError):
    """Later runs were computed on top of what a retraction would remove."""


class FetchError(FeedledgerError):
    """The source could not be fetched: unreachable, an HTTP or portal error answered, a
    redirect loop, the fetch deadline passed, the layer republished while downloaded.
    Nothing was archived; the same run can be tried again later."""


class SourceNotFound(NotFoundError):
    """A source that feedledger.toml (or the opened ledger) does not declare."""
