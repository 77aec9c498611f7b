"""Errors from below the API that are not FeedledgerErrors yet, as one: a statement the
store refused, or a lost connection (the faces render them as one line); and the
warning and error of a snapshot inside a gap (`GapWarning`, `InGap`)."""

from __future__ import annotations

import sys
from typing import Any

from feedledger.model.errors import ConfigError, FeedledgerError, StoreUnavailableError


def store_failure(exc: BaseException) -> FeedledgerError | None:
    """An SQLAlchemy DBAPIError as a StoreUnavailableError naming the cause (a lost
    connection, or the statement's refusal with the schema hint); None for anything
    else. SQLAlchemy is imported only by commands that use the store, so it is looked
    up, not imported, here."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None or not isinstance(exc, sa_exc.DBAPIError):
        return None
    reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
    from feedledger.ledger.engine import lost_connection

    lost = lost_connection(exc, "(see feedledger.toml [store])")
    if lost is not None:
        return lost
    return StoreUnavailableError(
        f"the store refused a statement: {reason}",
        hint="is its schema from this feedledger version? `feedledger db current`; "
        "set FEEDLEDGER_DEBUG=1 for the traceback",
    )


class GapWarning(UserWarning):
    """A snapshot asked for a valid time inside a standing gap (a stretch the source was
    not observed): the rows are the state as last observed before it, not an
    observation. `Source.snapshot`, `snapshot_batches` and `export_snapshot` warn with
    it; `.gap` is the `SnapshotGap`."""

    def __init__(self, text: str, gap: Any) -> None:
        super().__init__(text)
        self.gap = gap


class InGap(ConfigError):
    """A snapshot with `strict=True` (CLI `--strict`, HTTP `?strict=1`) asked for a
    valid time inside a standing gap: refused, nothing read or written. `.gap` is the
    `SnapshotGap` (the gap, the last and next observation around it). Exit code 2, HTTP
    409."""

    def __init__(self, text: str, gap: Any, *, source: str, hint: str | None = None) -> None:
        super().__init__(text, source=source, hint=hint)
        self.gap = gap


def gap_text(source: str, valid: str, inside: Any) -> str:
    """What a snapshot inside a standing gap says (the CLI's warning, `GapWarning`,
    `InGap`): the valid time, the gap and its reason, the last and next observation."""
    gap = inside.gap
    last, nxt = inside.last_observed_at, inside.next_observed_at
    return (
        f"{valid} is inside a gap {gap.start.isoformat()} .. {gap.end.isoformat()} "
        f"({gap.reason}): {source} was not observed then; last observed "
        f"{last.isoformat() if last else 'never'}, next observed "
        f"{nxt.isoformat() if nxt else 'not yet'}"
    )
