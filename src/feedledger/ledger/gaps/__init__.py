"""Gap records: explicit "not observed" stretches of a source's valid time (ledger/gaps/:
the records and what stands of them here; `manual`, a gap recorded by hand).

A gap covers [start_at, end_at) (end exclusive). It is visible at transaction time K
like a version (`ledger.visibility`): recorded by then and not retracted by then.
Gaps are written by a backfill or replay for the publication days the archive does
not hold, or by hand.

What STANDS of a gap is one rule (`standing`), used by `gaps`, `asof`, `history
--with-gaps` and `snapshot` alike: the recorded stretch minus every calendar day (in
the source's timezone) on which a payload applied later was published -- that day was
observed after all. A late payload inside a gap shrinks it or splits it in two.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, insert, select, update

from feedledger.ledger.records import Gap
from feedledger.ledger.schema import applications, gaps
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import visible
from feedledger.model.cadence import day_start_us, local_date


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
            visible(gaps, None),
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
        stmt = stmt.where(visible(gaps, known_at))
    stmt = stmt.order_by(gaps.c.start_at, gaps.c.gap_id)
    with store.engine.connect() as conn:
        return [_gap(r) for r in conn.execute(stmt)]


def observed_at(store: Store, source: str, known_at: int | None = None) -> list[int]:
    """Publisher times of the source's payloads applied and standing as known at
    `known_at` (recorded by then, not retracted by then), ascending."""
    a = applications
    stmt = select(a.c.published_at).where(a.c.source == source)
    stmt = stmt.where(visible(a, known_at))
    with store.engine.connect() as conn:
        return sorted({int(r.published_at) for r in conn.execute(stmt)})


def _observed_days(observed: list[int], tz: str) -> list[tuple[int, int]]:
    """The calendar days (source timezone) of these publisher times, as merged spans."""
    spans: list[tuple[int, int]] = []
    for day in sorted({local_date(t, tz) for t in observed}):
        lo, hi = day_start_us(day, tz), day_start_us(day + timedelta(days=1), tz)
        if spans and spans[-1][1] >= lo:
            spans[-1] = (spans[-1][0], max(spans[-1][1], hi))
        else:
            spans.append((lo, hi))
    return spans


def _subtract(gap: Gap, seen: list[tuple[int, int]]) -> list[Gap]:
    pieces: list[Gap] = []
    lo = gap.start_at
    for s_lo, s_hi in seen:
        if s_hi <= lo or s_lo >= gap.end_at:
            continue
        if s_lo > lo:
            pieces.append(dataclasses.replace(gap, start_at=lo, end_at=s_lo))
        lo = max(lo, s_hi)
    if lo < gap.end_at:
        pieces.append(dataclasses.replace(gap, start_at=lo, end_at=gap.end_at))
    return pieces


def standing(
    store: Store,
    source: str,
    tz: str,
    *,
    known_at: int | None = None,
    observed: list[int] | None = None,
    listed: list[Gap] | None = None,
) -> list[Gap]:
    """The stretches of the source's visible gaps still not observed as known at
    `known_at`: each gap minus the days of the payloads applied inside it (a gap may be
    shrunk, split, or gone). Each piece keeps its gap's id, reason, run and times;
    ordered by start. `observed`: `observed_at(...)`, `listed`: `listing(...)`, if the
    caller already has them (`entity_read` reads both with the entity)."""
    if listed is None:
        listed = listing(store, source, known_at=known_at)
    if not listed:  # no gap: no observed days to work out
        return []
    seen = _observed_days(
        observed if observed is not None else observed_at(store, source, known_at), tz
    )
    out: list[Gap] = []
    for gap in listed:
        out.extend(_subtract(gap, seen))
    return sorted(out, key=lambda g: (g.start_at, g.gap_id))


def at(store: Store, source: str, tz: str, instant: int, known_at: int | None = None) -> Gap | None:
    """The standing gap piece of `source` covering `instant`, if any (see `standing`)."""
    for piece in standing(store, source, tz, known_at=known_at):
        if piece.start_at <= instant < piece.end_at:
            return piece
    return None


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
            select(gaps).where(gaps.c.source == source, gaps.c.end_at > start, visible(gaps, None))
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
