"""Gap records: explicit "not observed" stretches of a source's valid time.

A gap covers [start_at, end_at) (end exclusive). It is visible at transaction time K
like a version: recorded by then and not retracted by then. Gaps are written by a
backfill or replay for the publication days the archive does not hold, or by hand.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, insert, or_, select, update

from feedledger.ledger.records import Gap
from feedledger.ledger.schema import gaps
from feedledger.ledger.store import Store


def _visible(known_at: int | None) -> Any:
    if known_at is None:
        return gaps.c.retracted_at.is_(None)
    return and_(
        gaps.c.recorded_at <= known_at,
        or_(gaps.c.retracted_at.is_(None), gaps.c.retracted_at > known_at),
    )


def _gap(row: Any) -> Gap:
    return Gap(
        gap_id=row.gap_id,
        source=row.source,
        start_at=row.start_at,
        end_at=row.end_at,
        reason=row.reason,
        run_id=row.run_id,
        recorded_at=row.recorded_at,
        retracted_at=row.retracted_at,
    )


def covering(conn: Connection, source: str, start: int, end: int) -> bool:
    """True if a visible gap of the source is exactly [start, end)."""
    row = conn.execute(
        select(gaps.c.gap_id).where(
            gaps.c.source == source,
            gaps.c.start_at == start,
            gaps.c.end_at == end,
            gaps.c.retracted_at.is_(None),
        )
    ).first()
    return row is not None


def record(
    conn: Connection,
    source: str,
    spans: list[tuple[int, int]],
    *,
    reason: str,
    run_id: str,
    recorded_at: int,
) -> int:
    """Insert gap records for `spans`, skipping any span an existing visible gap of the
    source already covers exactly (a resumed backfill does not double them)."""
    written = 0
    for start, end in spans:
        if covering(conn, source, start, end):
            continue
        conn.execute(
            insert(gaps).values(
                source=source,
                start_at=start,
                end_at=end,
                reason=reason,
                run_id=run_id,
                recorded_at=recorded_at,
            )
        )
        written += 1
    return written


def listing(
    store: Store, source: str, *, known_at: int | None = None, include_retracted: bool = False
) -> list[Gap]:
    stmt = select(gaps).where(gaps.c.source == source)
    if include_retracted:
        if known_at is not None:
            stmt = stmt.where(gaps.c.recorded_at <= known_at)
    else:
        stmt = stmt.where(_visible(known_at))
    stmt = stmt.order_by(gaps.c.start_at, gaps.c.gap_id)
    with store.engine.connect() as conn:
        return [_gap(r) for r in conn.execute(stmt)]


def at(store: Store, source: str, instant: int, known_at: int | None = None) -> Gap | None:
    """The visible gap of `source` covering `instant`, if any."""
    stmt = (
        select(gaps)
        .where(
            gaps.c.source == source,
            gaps.c.start_at <= instant,
            gaps.c.end_at > instant,
            _visible(known_at),
        )
        .order_by(gaps.c.start_at)
        .limit(1)
    )
    with store.engine.connect() as conn:
        row = conn.execute(stmt).first()
    return _gap(row) if row is not None else None


def retract_by_runs(conn: Connection, run_ids: list[str], *, by: str, at_us: int) -> int:
    if not run_ids:
        return 0
    result = conn.execute(
        update(gaps)
        .where(gaps.c.run_id.in_(run_ids), gaps.c.retracted_at.is_(None))
        .values(retracted_at=at_us, retracted_by=by)
    )
    return int(result.rowcount or 0)


def retract_from(conn: Connection, source: str, start: int, *, by: str, at_us: int) -> int:
    """Retract the source's visible gaps that end after `start` (a replay from `start`
    re-derives them); the part before `start` of a gap that straddles it is recorded
    again, as a gap of run `by` with the same reason."""
    rows = list(
        conn.execute(
            select(gaps).where(
                gaps.c.source == source, gaps.c.end_at > start, gaps.c.retracted_at.is_(None)
            )
        )
    )
    if not rows:
        return 0
    conn.execute(
        update(gaps)
        .where(gaps.c.gap_id.in_([r.gap_id for r in rows]))
        .values(retracted_at=at_us, retracted_by=by)
    )
    for r in rows:
        if r.start_at < start:
            record(
                conn, source, [(r.start_at, start)], reason=r.reason, run_id=by, recorded_at=at_us
            )
    return len(rows)
