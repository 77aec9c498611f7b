"""The publications sensor: a partition per archived publication date (oldest first),
those already applied reported as materialised by the run that applied them, and the
waiting ones requested as ONE run over their range -- which, launched, is one
feedledger backfill."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

import feedledger as fl
from feedledger.dagster import FeedledgerResource, feedledger_assets

PUBLICATIONS = dg.AssetKey(["feedledger", "larimer", "publications"])
PARTITIONS = "feedledger_larimer_publications"
SENSOR = "feedledger_larimer_publications_sensor"


def export(zoning: str) -> bytes:
    return f"parcel_id,zoning\n1,{zoning}\n2,A\n".encode()


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, resource: Any) -> Any:
    sensor = defs.resolve_sensor_def(SENSOR)
    context = dg.build_sensor_context(instance=instance, resources={"feedledger": resource})
    return sensor(context)


def test_the_sensor_adds_a_partition_per_archived_publication(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src = ledger.source("larimer")
    applied = src.ingest(export("R-1"), published_at=date(2026, 8, 1))
    # archived after the watermark, the newer one first
    src.archive_add(export("MU-3"), published_at=date(2026, 8, 5), name="larimer_2026-08-05.csv")
    src.archive_add(export("MU-2"), published_at=date(2026, 8, 3), name="larimer_2026-08-03.csv")
    defs = feedledger_assets(resource, sources=["larimer"])

    result = tick(defs, instance, resource)
    assert isinstance(result, dg.SensorResult)
    added = instance.get_dynamic_partitions(PARTITIONS)
    assert added == ["2026-08-01", "2026-08-03", "2026-08-05"]
    # the applied publication: reported, naming the run that applied it
    (event,) = result.asset_events
    assert event.partition == "2026-08-01" and event.metadata["run_id"].value == applied.run_id
    assert event.metadata["run_page"].value == f"{resource.dashboard_url}/runs/{applied.run_id}"
    # the waiting ones: one run over their range
    (request,) = result.run_requests
    assert request.tags["dagster/asset_partition_range_start"] == "2026-08-03"
    assert request.tags["dagster/asset_partition_range_end"] == "2026-08-05"

    # Dagster launches the request: one feedledger backfill
    asset = defs.resolve_assets_def(PUBLICATIONS)
    assert dg.materialize([asset], instance=instance, tags=request.tags).success
    runs = src.runs()
    assert [(r.kind, r.payloads) for r in runs] == [
        (fl.RunKind.LIVE, 1),
        (fl.RunKind.BACKFILL, 2),
    ]
    assert [v.attributes["zoning"] for v in src.history("1")] == ["R-1", "MU-2", "MU-3"]

    # nothing new archived: the next tick skips
    assert isinstance(tick(defs, instance, resource), dg.SkipReason)
