"""Errors from below the API that are not FeedledgerErrors yet, as one: a statement the
store refused, or a lost connection (the faces render them as one line)."""

from __future__ import annotations

import sys

from feedledger.model.errors import FeedledgerError, StoreUnavailableError


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
