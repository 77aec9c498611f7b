"""`health` reads all sources with a fixed number of statements
(one per table), and its report is exactly the one the per-source reads gave -- checked
against the former per-source implementation, kept here as the reference, over sources
in varied states (fresh, stale across a gap, frozen, held, failing, recovering, never
run, retracted, weekly, with waiting notifications) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import event, update

import feedledger as fl
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import gaps, schedule_state
from feedledger.ledger.runs import leases
from feedledger.ledger.views.health import source_facts
from feedledger.model.cadence import day_start_us, due_dates, local_date
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso, to_us
from feedledger.notify import deliveries
from feedledger.notify.tables import deliveries as deliveries_table
from feedledger.pipeline.health import SourceHealth, health

NOW = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
NOW_US = to_us(NOW)
HOUR = 3_600_000_000


# -- the former per-source implementation (about 9 statements per source) -------------
def old_missed_dates(ctx: Context, src: SourceConfig, now_us: int) -> list[date]:
    wm = ctx.store.watermark(src.name)
    if wm is not None and wm.published_at is not None:
        after = local_date(wm.published_at, src.timezone)
    else:
        first = schedule_state.get(ctx.store, src.name).first_attempt_at
        if first is None:
            return []
        after = local_date(first, src.timezone) - timedelta(days=1)
    days = due_dates(src.cadence, src.timezone, after, now_us, src.publish_at)
    if not days:
        return []
    spans = [(g.start_at, g.end_at) for g in gaps.listing(ctx.store, src.name)]

    def covered(d: date) -> bool:
        lo = day_start_us(d, src.timezone)
        hi = day_start_us(d + timedelta(days=1), src.timezone)
        return any(a <= lo and b >= hi for a, b in spans)

    return [d for d in days if not covered(d)]


def old_source_health(ctx: Context, src: SourceConfig, now_us: int) -> SourceHealth:
    store = ctx.store
    state = schedule_state.get(store, src.name)
    facts = source_facts(store, src.name)
    ice, lease, held, fetched = facts.freeze, facts.lease, facts.held_runs, facts.last_fetched_at
    waiting = deliveries.waiting_counts(store, src.name)
    wm = store.watermark(src.name)
    missed = old_missed_dates(ctx, src, now_us)
    lease_info: dict[str, Any] = {"state": "free"}
    if lease is not None and lease.holder is not None:
        lease_info = {
            "state": "held",
            "holder": lease.holder,
            "run_id": lease.run_id,
            "expires_at": iso(lease.expires_at),
            "heartbeat_at": iso(lease.heartbeat_at),
        }
    last_success = max((t for t in (state.last_success_at, fetched) if t is not None), default=None)
    return SourceHealth(
        source=src.name,
        cadence=src.cadence,
        scheduled=src.fetch is not None,
        frozen=ice is not None,
        stale=ice is None and len(missed) > src.stale_after,
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


# -- a workspace of sources in varied states --------------------------------------------
def csv(tag: str, n: int = 3) -> bytes:
    return ("id,v\n" + "".join(f"{i},{tag}{i}\n" for i in range(n))).encode()


def build(led: fl.Ledger) -> None:
    store = led.context.store
    fetch = "http://127.0.0.1:9/feed_{date}.csv"
    led.add_source("fresh", key=["id"], timezone="UTC", cadence="daily")
    for day in ("2026-08-09", "2026-08-10"):
        led.source("fresh").ingest(csv(day), published_at=day)
    stale = led.add_source("stale", key=["id"], timezone="America/Denver", publish_at="06:00")
    stale.ingest(csv("a"), published_at="2026-08-01")
    stale.add_gap("2026-08-03", "2026-08-05", "portal down")
    frozen = led.add_source("frozen", key=["id"], timezone="UTC")
    frozen.ingest(csv("f"), published_at="2026-08-02")
    frozen.freeze("restating")
    held = led.add_source("held", key=["id"], timezone="UTC", stale_after=3)
    held.ingest(csv("h"), published_at="2026-08-09")
    leases.acquire(store, "held", "holder-h", "run-held-1", run_kind="live")
    leases.release(store, "held", "holder-h", run_id="run-held-1", status="held")
    led.add_source("failing", key=["id"], timezone="UTC", fetch=fetch)
    for k in range(2):
        schedule_state.attempted(
            store, "failing", at=NOW_US - (5 - k) * 24 * HOUR, outcome="failed", success=False,
            error="connection refused", next_attempt_at=NOW_US + HOUR,
        )  # fmt: skip
    rec = led.add_source("recovering", key=["id"], timezone="Europe/Paris", fetch=fetch)
    rec.ingest(csv("r"), published_at="2026-08-04")
    schedule_state.attempted(store, "recovering", at=NOW_US - HOUR, outcome="waiting", success=True)
    leases.acquire(store, "recovering", "holder-r", "run-rec-1", run_kind="backfill")
    led.add_source("never", key=["id"], timezone="UTC")
    led.add_source("tried", key=["id"], timezone="UTC", fetch=fetch)
    schedule_state.attempted(store, "tried", at=NOW_US - 30 * HOUR, outcome="empty", success=True)
    led.source("tried").add_gap("2026-08-09", "2026-08-09", "not published")
    stale.add_gap("2026-07-20", "2026-07-22", "before the watermark")
    gone = led.add_source("retracted", key=["id"], timezone="UTC")
    gone.ingest(csv("x"), published_at="2026-08-07")
    last = gone.ingest(csv("y"), published_at="2026-08-08")
    led.retract(last.run_id)
    weekly = led.add_source("weekly", key=["id"], timezone="UTC", cadence="0 6 * * 1")
    weekly.ingest(csv("w"), published_at="2026-07-20")
    led.notify.add_subscriber("inbox", webhook="http://127.0.0.1:9/hook", sources=["fresh"])
    led.notify.dispatch(once=True, timeout_s=1.0)
    with store.begin() as conn:  # one message each pending, failed (as sent), dead
        ids = [r.delivery_id for r in conn.execute(deliveries_table.select())]
        assert len(ids) >= 3
        for status, delivery_id in zip(("pending", "dead"), ids, strict=False):
            conn.execute(
                update(deliveries_table)
                .where(deliveries_table.c.delivery_id == delivery_id)
                .values(status=status)
            )


def test_batched_health_equals_the_per_source_reads(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        build(led)
        ctx = led.context
        names = sorted(ctx.workspace.sources)
        expected = [old_source_health(ctx, ctx.workspace.source(n), NOW_US) for n in names]
        got = health(ctx, NOW_US)
        assert [h.to_json() for h in got] == [h.to_json() for h in expected]
        assert got == expected
        # the states are the varied ones meant (the comparison is not between empties)
        by = {h.source: h.to_json() for h in got}
        assert by["fresh"]["status"] == "ok" and by["stale"]["status"] == "stale"
        assert "2026-08-04" not in by["stale"]["missed_dates"]  # inside the gap
        assert by["frozen"]["status"] == "frozen" and by["held"]["held_runs"] == 1
        assert by["failing"]["schedule"]["failures"] == 2 and by["failing"]["stale"]
        assert by["recovering"]["lease"]["state"] == "held"
        assert by["never"]["missed_publications"] == 0 and by["tried"]["missed_publications"]
        assert "2026-08-09" not in by["tried"]["missed_dates"]  # a gap, never applied
        assert by["retracted"]["last_publisher_date"].startswith("2026-08-07")
        assert sum(by["fresh"]["notifications"].values()) >= 3
        assert set(by["fresh"]["notifications"]) == {"pending", "failed", "dead"}
        assert all(by["fresh"]["notifications"].values())
        # a subset, in the order asked, and the public API's typed result agree too
        subset = ["weekly", "fresh", "never"]
        assert [h.to_json() for h in health(ctx, NOW_US, subset)] == [
            old_source_health(ctx, ctx.workspace.source(n), NOW_US).to_json() for n in subset
        ]
        typed = led.health(at=NOW)
        assert [h.to_json() for h in typed] == [h.to_json() for h in expected]


def test_health_reads_a_fixed_number_of_statements(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        for i in range(12):
            src = led.add_source(f"s{i:02d}", key=["id"], timezone="UTC")
            if i % 3:
                src.ingest(csv(str(i)), published_at="2026-08-0" + str(1 + i % 9))
        count = [0]

        def counted(*_: Any) -> None:
            count[0] += 1

        engine = led.context.store.engine
        event.listen(engine, "before_cursor_execute", counted)
        try:
            health(led.context, NOW_US, ["s01"])
            one = count[0]
            count[0] = 0
            report = health(led.context, NOW_US)
            assert len(report) == 12 and count[0] == one
        finally:
            event.remove(engine, "before_cursor_execute", counted)
