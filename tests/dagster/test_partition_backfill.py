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


def publications(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    instance: dg.DagsterInstance,
    archived: list[int],
    partitions: list[int],
) -> tuple[fl.Source, dg.AssetsDefinition]:
    """The county source with its August exports of `archived` days archived in that
    order, the partitions of `partitions` days added in that order, and the
    publications asset."""
    src = ledger.source("larimer")
    archive(src, archived)
    instance.add_dynamic_partitions(PARTITIONS, [f"2026-08-0{d}" for d in partitions])
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(PUBLICATIONS)
    return src, asset


def launch(asset: dg.AssetsDefinition, instance: dg.DagsterInstance, key: str) -> dict[str, Any]:
    """One partition materialised on its own: its materialisation's metadata."""
    return materialised(dg.materialize([asset], instance=instance, partition_key=key))[key]


def zoning_history(src: fl.Source) -> list[str]:
    """Parcel 1's zoning, version by version."""
    return [v.attributes["zoning"] for v in src.history("1")]


def test_a_range_added_out_of_order_is_one_run_in_publisher_order(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    # the partitions in the order the publications became known: not publisher order
    src, asset = publications(resource, ledger, instance, [6, 2, 4], [6, 2, 4])
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
    assert zoning_history(src) == ["R-1", "MU-2", "MU-3"]
    assert [v.valid_from.date().isoformat() for v in src.history("1")] == [
        "2026-08-02", "2026-08-04", "2026-08-06",
    ]  # fmt: skip
    assert [g.start.date().isoformat() for g in src.gaps()] == ["2026-08-03", "2026-08-05"]


def test_partitions_launched_one_by_one_out_of_order_never_skip_or_repeat(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src, asset = publications(resource, ledger, instance, [2, 4, 6], [2, 4, 6])
    # the newest first: every publication waiting before it is applied first, in order
    newest = launch(asset, instance, "2026-08-06")
    (run,) = src.runs()
    assert run.payloads == 3 and newest["run_id"] == run.run_id
    assert newest["window"] == "2026-08-02..2026-08-06"
    # the older ones after it: applied already, nothing repeated, no new run
    for key in ["2026-08-02", "2026-08-04"]:
        assert launch(asset, instance, key)["status"] == "nothing_to_do"
    assert len(src.runs()) == 1
    assert zoning_history(src) == ["R-1", "MU-2", "MU-3"]


def test_a_middle_partition_first_applies_the_waiting_one_before_it(
    resource: FeedledgerResource, ledger: fl.Ledger, instance: dg.DagsterInstance
) -> None:
    src, asset = publications(resource, ledger, instance, [2, 4, 6], [2, 4, 6])
    middle = launch(asset, instance, "2026-08-04")
    assert middle["window"] == "2026-08-02..2026-08-04"
    assert "window_note" in middle
    newest = launch(asset, instance, "2026-08-06")
    runs = src.runs()
    assert [r.payloads for r in runs] == [2, 1]
    assert newest["run_id"] == runs[1].run_id
    # nothing became late: every archived publication is applied, in publisher order
    assert zoning_history(src) == ["R-1", "MU-2", "MU-3"]
