"""A run's changes a page at a time (the HTTP API's `/api/runs/{id}/changes`): the
versions it wrote in (valid_from, key) order, then the per-key outcomes that did not
become versions in (published_at, key) order -- `queries.changes` and `queries.run_outcomes`
given a keyset bound and a limit, so a page costs its own rows whatever the run's size."""

from __future__ import annotations

from sqlalchemy import func, select

from feedledger.ledger import queries
from feedledger.ledger.queries import KeyOutcome
from feedledger.ledger.records import Change
from feedledger.ledger.schema import applications, outcomes
from feedledger.ledger.store import Store

Bound = tuple[int, str]  # (valid_from or published_at, key) of the last row of a page


def count(store: Store, run_id: str) -> tuple[int, int]:
    """(versions the run wrote, outcomes that did not become versions)."""
    a, o = applications, outcomes
    with store.engine.connect() as conn:
        changes = conn.execute(
            select(func.coalesce(func.sum(a.c.changes), 0)).where(a.c.run_id == run_id)
        ).scalar_one()
        held = conn.execute(select(func.count()).where(o.c.run_id == run_id)).scalar_one()
    return int(changes), int(held)


def changes(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[Change]:
    """Up to `limit` changes of the run after `after`, as `queries.changes` gives them."""
    return queries.changes(store, run_id, geo=geo, after=after, limit=limit)


def held(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[KeyOutcome]:
    """Up to `limit` outcomes of the run after `after`, as `queries.run_outcomes`."""
    return queries.run_outcomes(store, run_id, geo=geo, after=after, limit=limit)
