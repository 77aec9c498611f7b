"""What `health` reads of the ledger for many sources at once, through one connection
and a fixed number of statements (one per table, whatever the number of sources): the
watermark, the scheduler's state, frozen, the lease, runs held for review, the last
fetch and the standing gaps health's missed days can fall in (`health_rows`). Each is an
index scan at a fleet's size (tests/scheduler/test_fleet_plans.py: 300 sources, a year
each, on PostgreSQL): the held runs through `ix_runs_status_source`, the last fetch one
backward index probe per source on `ix_payloads_source_fetched`, the gaps only those
ending after the oldest of the sources' watermarks, on `ix_gaps_end` (migration 0014).
`source_facts` below and the per-source readers answer the same for one source;
`pipeline/health` turns these rows into its report.

`source_facts`: what `health` reports of one source from the ledger, read through one
connection: frozen, the lease, runs held for review, the last fetch;
tests/pipeline/test_health.py checks the two agree."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, String, column, func, select, values

from feedledger.ledger import queries
from feedledger.ledger.records import Watermark
from feedledger.ledger.runs import lookup
from feedledger.ledger.runs.freezes import Freeze, frozen
from feedledger.ledger.runs.leases import LeaseState
from feedledger.ledger.runs.leases import current as current_lease
from feedledger.ledger.schedule_state import State
from feedledger.ledger.schema import freezes, gaps, leases, payloads, schedule_state, watermarks
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import visible
from feedledger.model.timeutil import DAY_US


@dataclass(slots=True)
class HealthRows:
    """One source's rows (defaults: the source has none)."""

    source: str
    watermark: Watermark | None = None
    state: State | None = None
    freeze: Freeze | None = None
    lease: LeaseState | None = None
    held_runs: int = 0
    last_fetched_at: int | None = None
    # the standing gaps' [start_at, end_at) that end after the watermark's publisher
    # time (never applied: two days before the scheduler's first attempt; neither: none),
    # in gaps.listing's order -- every gap that can cover a day health counts as missed
    gap_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def schedule(self) -> State:
        return self.state if self.state is not None else State(self.source)


def health_rows(store: Store, sources: list[str], *, facts: bool = True) -> dict[str, HealthRows]:
    """Every one of `sources` (each a key of the result) with its rows. `facts=False`:
    without the runs held for review and the last fetch (left 0 and None), which
    neither a source's due time nor its missed days depend on (the scheduler's tick)."""
    got = {s: HealthRows(s) for s in sources}
    if not sources:
        return got
    with store.engine.connect() as conn:
        _watermarks(conn, sources, got)
        _states(conn, sources, got)
        _freezes_and_leases(conn, sources, got)
        if facts:
            for source, n in lookup.held_counts(conn, sources).items():
                got[source].held_runs = n
            _last_fetches(conn, sources, got)
        _standing_gaps(conn, got)
    return got


def _watermarks(conn: Connection, sources: list[str], got: dict[str, HealthRows]) -> None:
    for row in conn.execute(select(watermarks).where(watermarks.c.source.in_(sources))):
        got[row.source].watermark = Watermark(
            source=row.source,
            published_at=row.published_at,
            payload_id=row.payload_id,
            txn_seq=row.txn_seq,
            recorded_at=row.recorded_at,
        )


def _states(conn: Connection, sources: list[str], got: dict[str, HealthRows]) -> None:
    stmt = select(schedule_state).where(schedule_state.c.source.in_(sources))
    for row in conn.execute(stmt):
        got[row.source].state = State(**{c.name: getattr(row, c.name) for c in schedule_state.c})


def _last_fetches(conn: Connection, sources: list[str], got: dict[str, HealthRows]) -> None:
    """max(fetched_at) per source as one probe of (source, fetched_at) each: a GROUP BY
    over the sources would read all their payloads."""
    wanted = values(column("source", String), name="wanted").data([(s,) for s in sources])
    w = wanted.cte("wanted")
    last = (
        select(func.max(payloads.c.fetched_at))
        .where(payloads.c.source == w.c.source)
        .scalar_subquery()
    )
    for source, at in conn.execute(select(w.c.source, last)):
        got[source].last_fetched_at = int(at) if at is not None else None


def _gap_bound(rows: HealthRows) -> int | None:
    """A standing gap that can cover one of the source's missed days ends after this
    (pipeline/health.py `_missed`: the days counted are after the watermark's local
    date, or, never applied, from the first attempt's local date, a day of at most 25
    hours); None: no day can be missed, no gap is asked for."""
    wm = rows.watermark
    if wm is not None and wm.published_at is not None:
        return wm.published_at
    first = rows.schedule.first_attempt_at
    return first - 2 * DAY_US if first is not None else None


def _standing_gaps(conn: Connection, got: dict[str, HealthRows]) -> None:
    """One range of `ix_gaps_end`, after the oldest of the sources' bounds (a join on
    each source's own bound, or a range per source, is planned as a scan of the table);
    each source's own bound is applied here."""
    bounds = {s: b for s, rows in got.items() if (b := _gap_bound(rows)) is not None}
    if not bounds:
        return
    standing = (
        select(gaps.c.source, gaps.c.start_at, gaps.c.end_at)
        .where(
            gaps.c.source.in_(sorted(bounds)),
            gaps.c.end_at > min(bounds.values()),
            visible(gaps, None),
        )
        .order_by(gaps.c.source, gaps.c.start_at, gaps.c.gap_id)
    )
    for source, start, end in conn.execute(standing):
        if end > bounds[source]:
            got[source].gap_spans.append((start, end))


def _freezes_and_leases(conn: Connection, sources: list[str], got: dict[str, HealthRows]) -> None:
    for row in conn.execute(select(freezes).where(freezes.c.source.in_(sources))):
        got[row.source].freeze = Freeze(row.source, row.frozen_at, row.reason)
    for row in conn.execute(select(leases).where(leases.c.source.in_(sources))):
        got[row.source].lease = LeaseState(row.holder, row.run_id, row.expires_at, row.heartbeat_at)


@dataclass(frozen=True, slots=True)
class SourceFacts:
    freeze: Freeze | None
    lease: LeaseState | None
    held_runs: int
    last_fetched_at: int | None


def source_facts(store: Store, source: str) -> SourceFacts:
    with store.engine.connect() as conn:
        return SourceFacts(
            freeze=frozen(conn, source),
            lease=current_lease(conn, source),
            held_runs=lookup.held_count(conn, source),
            last_fetched_at=queries.last_fetched_at(conn, source),
        )
