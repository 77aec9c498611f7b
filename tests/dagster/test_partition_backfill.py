"""A Dagster backfill of publication-date partitions is ONE feedledger backfill in
publisher order, whatever order Dagster holds or launches the keys in (dynamic
partitions keep the order they were added in: dagster-io/dagster#28693)."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

import feedledger as fl
from feedledger.dagster import FeedledgerResource, feedledger_assets

PUBLICATIONS = dg.AssetKey(["feedledger", "larimer", "publications"])
PARTITIONS = "feedledger_larimer_publications"
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
ZONING = {2: "R-1", 4: "MU-2", 6: "MU-3"}


def archive(src: fl.Source, days: list[int]) -> None:
    """The county's exports of August `days`, archived (not applied) in that order."""
    for d in days:
        data = f"parcel_id,zoning\n1,{ZONING[d]}\n2,A\n".encode()
        src.archive_add(data, published_at=date(2026, 8, d), name=f"larimer_2026-08-0{d}.csv")


def materialised(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """Partition key -> its materialisation's metadata."""
    found: dict[str, dict[str, Any]] = {}
    for e in result.get_asset_materialization_events():
        m = e.event_specific_data.materialization
        assert m.partition is not None
        found[m.partition] = {k: v.value for k, v in m.metadata.items()}
    return found


def test_a_range_added_out_of_order_is_one_run_in_publisher_order(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src = ledger.source("larimer")
    archive(src, [6, 2, 4])
    # the partitions in the order the publications became known: not publisher order
    instance.add_dynamic_partitions(PARTITIONS, ["2026-08-06", "2026-08-02", "2026-08-04"])
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    result = dg.materialize(
        [asset], instance=instance, tags=dict(zip(RANGE, ["2026-08-06", "2026-08-04"], strict=True))
    )
    assert result.success
    (run,) = src.runs()  # ONE feedledger run for the whole range
    assert run.kind is fl.RunKind.BACKFILL and run.payloads == 3
    found = materialised(result)
    assert sorted(found) == ["2026-08-02", "2026-08-04", "2026-08-06"]
    for meta in found.values():
        assert meta["run_id"] == run.run_id
        assert meta["window"] == "2026-08-02..2026-08-06"
        assert [t[:10] for t in meta["publisher_order"]] == [
            "2026-08-02",
            "2026-08-04",
            "2026-08-06",
        ]
        assert meta["missing_dates"] == ["2026-08-03", "2026-08-05"]
        assert meta["gaps_recorded"] == 2
    # the ledger's history is in publisher order, each version at its publication
    history = src.history("1")
    assert [v.attributes["zoning"] for v in history] == ["R-1", "MU-2", "MU-3"]
    assert [v.valid_from.date().isoformat() for v in history] == [
        "2026-08-02", "2026-08-04", "2026-08-06",
    ]  # fmt: skip
    assert [g.start.date().isoformat() for g in src.gaps()] == ["2026-08-03", "2026-08-05"]


def test_partitions_launched_one_by_one_out_of_order_never_skip_or_repeat(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src = ledger.source("larimer")
    archive(src, [2, 4, 6])
    instance.add_dynamic_partitions(PARTITIONS, ["2026-08-02", "2026-08-04", "2026-08-06"])
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    # the newest first: every publication waiting before it is applied first, in order
    newest = materialised(dg.materialize([asset], instance=instance, partition_key="2026-08-06"))
    (run,) = src.runs()
    assert run.payloads == 3 and newest["2026-08-06"]["run_id"] == run.run_id
    assert newest["2026-08-06"]["window"] == "2026-08-02..2026-08-06"
    # the older ones after it: applied already, nothing repeated, no new run
    for key in ["2026-08-02", "2026-08-04"]:
        older = materialised(dg.materialize([asset], instance=instance, partition_key=key))
        assert older[key]["status"] == "nothing_to_do"
    assert len(src.runs()) == 1
    assert [v.attributes["zoning"] for v in src.history("1")] == ["R-1", "MU-2", "MU-3"]


def test_a_middle_partition_first_applies_the_waiting_one_before_it(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src = ledger.source("larimer")
    archive(src, [2, 4, 6])
    instance.add_dynamic_partitions(PARTITIONS, ["2026-08-02", "2026-08-04", "2026-08-06"])
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    middle = materialised(dg.materialize([asset], instance=instance, partition_key="2026-08-04"))
    assert middle["2026-08-04"]["window"] == "2026-08-02..2026-08-04"
    assert "window_note" in middle["2026-08-04"]
    newest = materialised(dg.materialize([asset], instance=instance, partition_key="2026-08-06"))
    runs = src.runs()
    assert [r.payloads for r in runs] == [2, 1]
    assert newest["2026-08-06"]["run_id"] == runs[1].run_id
    # nothing became late: every archived publication is applied, in publisher order
    assert [v.attributes["zoning"] for v in src.history("1")] == ["R-1", "MU-2", "MU-3"]
