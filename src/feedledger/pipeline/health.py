"""`feedledger health`: is every source up to date, and if not, since when?

Per source: the last successful fetch, the last applied payload's publisher date, the
expected publications missed since (due by now per the cadence, after the watermark's
date, not covered by a recorded gap), the lease, frozen, runs held for review, and its
undelivered notifications. A source is stale when it missed more than `stale_after`
publications; a frozen source is never stale (it was stopped on purpose). `now_us` is
a parameter: the scheduler passes its clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from feedledger.context import Context
from feedledger.ledger import gaps, schedule_state
from feedledger.ledger.views.health import HealthRows, health_rows
from feedledger.model.cadence import day_start_us, due_at, due_dates, local_date
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import DAY_US, iso
from feedledger.notify import deliveries

SHOWN_DATES = 31
BATCH = 500  # sources read per round of statements (bounds the IN lists)


@dataclass
class SourceHealth:
    source: str
    cadence: str
    scheduled: bool  # has a fetch location: the scheduler runs it
    frozen: bool
    stale: bool
    stale_after: int
    missed: int
    missed_dates: list[date] = field(default_factory=list)
    last_publisher_at: int | None = None
    last_success_at: int | None = None
    lease: dict[str, Any] = field(default_factory=dict)
    held_runs: int = 0
    notifications: dict[str, int] = field(default_factory=dict)
    schedule: dict[str, Any] = field(default_factory=dict)
    recovery: str = "auto"
    # the publisher's date ahead of the clock, or gone back with other content (one
    # line; health fails while it stands: pipeline/intake/observing.py)
    publisher_date_problem: str | None = None
    last_observed_at: int | None = None  # the last successful fetch, new or not

    @property
    def failing(self) -> bool:
        """Whether `health` fails for this source (exit 1)."""
        return self.stale or self.publisher_date_problem is not None

    @property
    def status(self) -> str:
        if self.frozen:
            return "frozen"
        if self.stale:
            return "stale"
        return "publisher_date" if self.publisher_date_problem else "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "publisher_date_problem": self.publisher_date_problem,
            "last_observed_at": iso(self.last_observed_at),
            "cadence": self.cadence,
            "scheduled": self.scheduled,
            "frozen": self.frozen,
            "stale": self.stale,
            "stale_after": self.stale_after,
            "missed_publications": self.missed,
            "missed_dates": [d.isoformat() for d in self.missed_dates[-SHOWN_DATES:]],
            "last_publisher_date": iso(self.last_publisher_at),
            "last_successful_fetch": iso(self.last_success_at),
            "lease": self.lease,
            "held_runs": self.held_runs,
            "notifications": self.notifications,
            "schedule": self.schedule,
            "recovery": self.recovery,
        }


def missed_dates(ctx: Context, src: SourceConfig, now_us: int) -> list[date]:
    """Expected publications due by `now_us` that the ledger has not got: after the
    watermark's date (or, never applied, after the scheduler's first attempt), minus
    the days a recorded gap covers."""
    wm = ctx.store.watermark(src.name)
    state = schedule_state.get(ctx.store, src.name)
    return _missed(
        src,
        wm.published_at if wm is not None else None,
        lambda: state,
        lambda: [(g.start_at, g.end_at) for g in gaps.listing(ctx.store, src.name)],
        now_us,
    )


def _missed(
    src: SourceConfig,
    published_at: int | None,
    schedule: Callable[[], schedule_state.State],
    gap_spans: Callable[[], list[tuple[int, int]]],
    now_us: int,
) -> list[date]:
    """`missed_dates` from the watermark's publisher time; the scheduler's state (the
    first attempt, the last observation) and the gaps are asked for only when needed.
    A day whose publication was due by the source's last observation is not missed: a
    successful fetch that found nothing new observed it (invariant 12)."""
    if published_at is not None:
        after = local_date(published_at, src.timezone)
    else:
        first = schedule().first_attempt_at
        if first is None:
            return []
        after = local_date(first, src.timezone) - timedelta(days=1)
    days = due_dates(src.cadence, src.timezone, after, now_us, src.publish_at)
    if not days:
        return []
    seen = schedule().observed_at
    if seen is not None:
        days = [d for d in days if due_at(src.cadence, src.timezone, d, src.publish_at) > seen]
        if not days:
            return []
    spans = gap_spans()

    def covered(d: date) -> bool:
        lo = day_start_us(d, src.timezone)
        hi = day_start_us(d + timedelta(days=1), src.timezone)
        return any(a <= lo and b >= hi for a, b in spans)

    return [d for d in days if not covered(d)]


def _source_health(
    src: SourceConfig, rows: HealthRows, waiting: dict[str, int], now_us: int
) -> SourceHealth:
    state = rows.schedule
    ice, lease, held, fetched = rows.freeze, rows.lease, rows.held_runs, rows.last_fetched_at
    wm = rows.watermark
    missed = _missed(
        src,
        wm.published_at if wm is not None else None,
        lambda: state,
        lambda: rows.gap_spans,
        now_us,
    )
    problem = state.date_problem
    ahead = wm is not None and wm.published_at is not None and wm.published_at > now_us + DAY_US
    if problem is None and ahead:
        assert wm is not None
        problem = (
            f"the watermark {iso(wm.published_at)} is ahead of the clock: every later "
            "publication is refused as not after it (retract the run that applied it, "
            "or wait for that date)"
        )
    lease_info: dict[str, Any] = {"state": "free"}
    if lease is not None and lease.holder is not None:
        lease_info = {
            "state": "held",
            "holder": lease.holder,
            "run_id": lease.run_id,
            "expires_at": iso(lease.expires_at),
            "heartbeat_at": iso(lease.heartbeat_at),
        }
    last_success = max(
        (t for t in (state.last_success_at, fetched, state.observed_at) if t is not None),
        default=None,
    )
    return SourceHealth(
        source=src.name,
        cadence=src.cadence,
        scheduled=src.fetch is not None,
        frozen=ice is not None,
        stale=ice is None and len(missed) > src.stale_after,
        publisher_date_problem=problem if ice is None else None,
        last_observed_at=state.observed_at,
        stale_after=src.stale_after,
        missed=len(missed),
        missed_dates=missed,
        last_publisher_at=wm.published_at if wm is not None else None,
        last_success_at=last_success,
        lease=lease_info,
        held_runs=int(held),
        notifications={k: int(waiting.get(k, 0)) for k in ("pending", "failed", "dead")},
        schedule={
            "last_attempt_at": iso(state.last_attempt_at),
            "last_outcome": state.last_outcome,
            "last_error": state.last_error,
            "failures": state.failures,
            "next_attempt_at": iso(state.next_attempt_at),
        },
        recovery=src.recovery,
    )


def health(ctx: Context, now_us: int, sources: list[str] | None = None) -> list[SourceHealth]:
    """The sources' health, read with a fixed number of statements per `BATCH` sources
    (not per source): one per table."""
    names = sources or sorted(ctx.workspace.sources)
    return from_rows(ctx, read_rows(ctx, names), names, now_us)


def read_rows(ctx: Context, names: list[str], *, facts: bool = True) -> dict[str, HealthRows]:
    """What health reads of the ledger for `names` (`health_rows`, `BATCH` at a time):
    the scheduler's tick reads it once for both its due sources and its health.
    `facts=False`: without held runs and last fetches (`health_rows`)."""
    got: dict[str, HealthRows] = {}
    for i in range(0, len(names), BATCH):
        got.update(health_rows(ctx.store, sorted(set(names[i : i + BATCH])), facts=facts))
    return got


def from_rows(
    ctx: Context,
    rows: dict[str, HealthRows],
    names: list[str],
    now_us: int,
    *,
    notifications: bool = True,
) -> list[SourceHealth]:
    """The health of `names` from their `rows` (`read_rows`) and their undelivered
    notifications (read here, one statement per `BATCH`; not with `notifications=False`:
    then counted 0)."""
    got: list[SourceHealth] = []
    for i in range(0, len(names), BATCH):
        batch = names[i : i + BATCH]
        waiting = (
            deliveries.waiting_counts_by_source(ctx.store, sorted(set(batch)))
            if notifications
            else {}
        )
        got.extend(
            _source_health(ctx.workspace.source(n), rows[n], waiting.get(n, {}), now_us)
            for n in batch
        )
    return got


def due_in(src: SourceConfig, rows: HealthRows, now_us: int) -> bool:
    """Whether the scheduler should attempt `src` at `now_us`, from its health rows: it
    has a fetch location, is not backing off, not frozen, and was never applied or
    missed a publication (`missed_dates`)."""
    if src.fetch is None:
        return False
    state = rows.schedule
    if state.next_attempt_at is not None and now_us < state.next_attempt_at:
        return False
    if rows.freeze is not None:
        return False
    wm = rows.watermark
    if wm is None:
        return True  # never applied: the first live run
    missed = _missed(src, wm.published_at, lambda: state, lambda: rows.gap_spans, now_us)
    return bool(missed)


def destination_lag(
    ctx: Context, now_us: int, sources: list[str] | None = None
) -> list[dict[str, Any]]:
    """Per destination (of `sources`, default all): how far its live route is behind
    its source -- outbox messages and changes after its cursor, and the age of the
    oldest (seconds at `now_us`); a paused route (a maintenance rebuild) says so."""
    # lazy: the sync modules (a dozen) load only where destinations are asked about
    from feedledger.sync import manifests, registry  # lazy: see above
    from feedledger.sync.rebuild import resume_point  # lazy: see above

    got = []
    mans = manifests.listing(ctx.store)
    for d in registry.listing(ctx.store):
        if sources and d.source not in sources:
            continue
        # rebuilds begun and not finished (running, or interrupted: a rerun resumes)
        unfinished = [
            r.to_json()
            for m in mans
            if m.source == d.source and (r := resume_point(ctx.store, d.name, m)) is not None
        ]
        lag = registry.lag(ctx.store, d.name, d.source)
        age = 0.0 if lag.oldest_at is None else max(0.0, (now_us - lag.oldest_at) / 1e6)
        got.append(
            {
                "destination": d.name,
                "source": d.source,
                "paused": d.paused_at is not None,
                "cursor": lag.cursor,
                "messages_behind": lag.messages,
                "changes_behind": lag.changes,
                "oldest_pending_at": iso(lag.oldest_at),
                "lag_s": round(age, 3),
                "unfinished_rebuilds": unfinished,
            }
        )
    return got
