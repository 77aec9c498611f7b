"""Runs across sources, newest first, a page at a time (the HTTP API's `/api/runs`):
keyset paging on (started_at, run_id), so a page is stable while runs are added."""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from feedledger.ledger.records import Run
from feedledger.ledger.runs import _run
from feedledger.ledger.schema import runs
from feedledger.ledger.store import Store


def page(
    store: Store,
    *,
    sources: list[str] | None,
    kind: str | None,
    status: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[Run]:
    """Up to `limit` runs older than `after` ((started_at, run_id) of the last run of the
    previous page), newest first, of `sources` (None: all), of `kind` and `status`."""
    stmt = select(runs)
    if sources is not None:
        stmt = stmt.where(runs.c.source.in_(sources))
    if kind is not None:
        stmt = stmt.where(runs.c.kind == kind)
    if status is not None:
        stmt = stmt.where(runs.c.status == status)
    if after is not None:
        started, run_id = after
        stmt = stmt.where(
            or_(
                runs.c.started_at < started,
                and_(runs.c.started_at == started, runs.c.run_id < run_id),
            )
        )
    stmt = stmt.order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(limit)
    with store.engine.connect() as conn:
        return [_run(r) for r in conn.execute(stmt)]
