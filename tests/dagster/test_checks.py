"""The checks of a source's ledger asset, run in-process: `no_held_burst` is blocking
(a downstream asset does not run while a burst waits for review, and runs once it is
released), `no_unrecorded_gaps` fails on a missed day until a gap records it, `fresh`
follows `health`, and `reconciled` compares a destination over a named manifest."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

import feedledger as fl
from feedledger.dagster import FeedledgerDestination, FeedledgerResource, feedledger_assets

LEDGER = dg.AssetKey(["feedledger", "larimer"])
REPORT = dg.AssetKey(["report"])


def rows(n: int, zoning: str = "A") -> bytes:
    return ("parcel_id,zoning\n" + "".join(f"{i},{zoning}\n" for i in range(1, n + 1))).encode()


def gated(defs: dg.Definitions, ran: list[str]) -> dg.JobDefinition:
    """A job running the source's ledger asset, its checks, then a downstream report."""

    @dg.asset(key=REPORT, deps=[LEDGER])
    def report() -> None:
        ran.append("report")

    job = dg.define_asset_job("gated", selection=dg.AssetSelection.assets(LEDGER, REPORT))
    merged = dg.Definitions.merge(defs, dg.Definitions(assets=[report], jobs=[job]))
    return merged.resolve_job_def("gated")


def checked(result: dg.ExecuteInProcessResult) -> dict[str, tuple[bool, dict[str, Any]]]:
    found = {}
    for e in result.get_asset_check_evaluations():
        found[e.check_name] = (e.passed, {k: v.value for k, v in e.metadata.items()})
    return found


def test_a_held_burst_blocks_downstream_assets_until_it_is_released(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    feed: Path,
    today: date,
    instance: dg.DagsterInstance,
) -> None:
    ledger.add_source(
        "larimer", replace=True, key=["parcel_id"], timezone="America/Denver",
        fetch=str(feed), hold_min_changes=1, hold_factor=2.0,
    )  # fmt: skip
    src = ledger.source("larimer")
    src.ingest(rows(3), published_at=today - timedelta(days=2))
    src.ingest(rows(4), published_at=today - timedelta(days=1))  # one change: normal
    burst = rows(20, "MU-1")  # 20 changes, ten times the normal
    held = src.ingest(burst, published_at=today)
    assert held.held_for_review
    (feed / f"larimer_{today.isoformat()}.csv").write_bytes(burst)  # served: nothing new

    ran: list[str] = []
    job = gated(feedledger_assets(resource, sources=["larimer"]), ran)
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    checks = checked(result)
    passed, meta = checks["no_held_burst"]
    assert not passed and meta["held_runs"] == [held.run_id]
    assert meta["review"] == f"{resource.dashboard_url}/runs/{held.run_id}"
    assert ran == []  # the blocking check stopped the downstream asset
    materialised = {e.asset_key for e in result.get_asset_materialization_events()}
    assert REPORT not in materialised

    assert held.run_id is not None
    ledger.review(held.run_id, release=True)
    result = job.execute_in_process(instance=instance)
    assert checked(result)["no_held_burst"][0]
    assert ran == ["report"]


def test_a_missed_day_is_an_unrecorded_gap_until_a_gap_records_it(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    publish: Any,
    today: date,
    instance: dg.DagsterInstance,
) -> None:
    src = ledger.source("larimer")
    src.ingest(rows(2), published_at=today - timedelta(days=3))
    src.ingest(rows(2, "B"), published_at=today)  # a live run: the days between missed
    publish(today, "B", "B")
    defs = feedledger_assets(resource, sources=["larimer"])
    job = gated(defs, [])
    checks = checked(job.execute_in_process(instance=instance, raise_on_error=False))
    passed, meta = checks["no_unrecorded_gaps"]
    missed = [(today - timedelta(days=n)).isoformat() for n in (2, 1)]
    assert not passed and meta["missed"] == missed
    assert checks["fresh"][0]  # today's publication is applied: not stale

    src.add_gap(today - timedelta(days=2), today - timedelta(days=1), "the county's outage")
    checks = checked(job.execute_in_process(instance=instance))
    passed, meta = checks["no_unrecorded_gaps"]
    assert passed and meta["days_in_recorded_gaps"] == 2


def test_fresh_fails_while_publications_are_missed(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    publish: Any,
    instance: dg.DagsterInstance,
) -> None:
    publish(date(2026, 8, 1), "R-1")  # long ago: every day since is missed
    job = gated(feedledger_assets(resource, sources=["larimer"]), [])
    checks = checked(job.execute_in_process(instance=instance, raise_on_error=False))
    passed, meta = checks["fresh"]
    assert not passed and meta["missed_publications"] > 0


def test_a_destination_is_synced_after_its_source_and_reconciled_over_its_manifest(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    publish: Any,
    today: date,
    tmp_path: Path,
    instance: dg.DagsterInstance,
) -> None:
    publish(today, "R-1", "A", "B")
    ledger.add_destination("search", source="larimer", table="parcels", sqlite=tmp_path / "d.db")
    defs = feedledger_assets(
        resource, sources=["larimer"],
        destinations=[FeedledgerDestination("search", manifest="m1")],
    )  # fmt: skip
    dest = dg.AssetKey(["feedledger", "destinations", "search"])
    job = dg.define_asset_job("sync", selection=dg.AssetSelection.assets(LEDGER, dest))
    run = dg.Definitions.merge(defs, dg.Definitions(jobs=[job])).resolve_job_def("sync")
    first = run.execute_in_process(instance=instance)
    passed, meta = checked(first)["reconciled"]
    assert not passed and "no manifest named 'm1'" in meta["problem"]
    sync = [e for e in first.get_asset_materialization_events() if e.asset_key == dest]
    synced = {k: v.value for k, v in sync[0].event_specific_data.materialization.metadata.items()}
    assert synced["live_written"] == 3
    ledger.create_manifest("m1", source="larimer")
    passed, meta = checked(run.execute_in_process(instance=instance))["reconciled"]
    assert not passed and meta["keys_without_verdict"] == 3  # never synced over it
    ledger.destination("search").rebuild("m1")
    passed, meta = checked(run.execute_in_process(instance=instance))["reconciled"]
    assert passed and meta["manifest"] == "m1" and meta["population"] == 3
