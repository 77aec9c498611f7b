"""The source's assets run in-process (`materialize`, `observe`) with an ephemeral
Dagster instance, on SQLite and PostgreSQL stores: the ledger asset's live run and
catch-up with their metadata, and the publisher observed as a data version."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import dagster as dg

import feedledger as fl
from feedledger.config import Workspace
from feedledger.dagster import FeedledgerResource, FeedledgerTranslator, feedledger_assets


def midnight(day: date) -> datetime:
    """00:00 of `day` in the source's timezone, in UTC (the publisher date of its file)."""
    return datetime.combine(day, time(), ZoneInfo("America/Denver")).astimezone(UTC)


LEDGER = dg.AssetKey(["feedledger", "larimer"])
PUBLISHER = dg.AssetKey(["feedledger", "larimer", "publisher"])


def materialised(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    meta = event.event_specific_data.materialization.metadata
    return {k: v.value for k, v in meta.items()}


def test_a_live_run_and_a_catch_up_are_materialisations_naming_their_run(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    publish: Any,
    today: date,
    instance: dg.DagsterInstance,
) -> None:
    defs = feedledger_assets(resource, sources=["larimer"])
    asset = defs.resolve_assets_def(LEDGER)
    page = f"{resource.dashboard_url}/runs/"
    # two publications waiting, a day missed between them: the scheduler's catch-up
    publish(today - timedelta(days=3), "R-1", "A")
    publish(today - timedelta(days=1), "MU-2", "A")
    first = dg.materialize([asset], instance=instance)
    assert first.success
    meta = materialised(first, LEDGER)
    runs = ledger.source("larimer").runs()
    assert [r.kind for r in runs] == [fl.RunKind.BACKFILL]
    assert (meta["status"], meta["kind"]) == ("recovered", "backfill")
    assert meta["run_id"] == runs[0].run_id
    assert meta["run_page"] == page + runs[0].run_id
    assert meta["publisher_order"] == [
        midnight(today - timedelta(days=3)).isoformat(),
        midnight(today - timedelta(days=1)).isoformat(),
    ]
    assert meta["missing_dates"] == [(today - timedelta(days=2)).isoformat()]
    assert meta["gaps_recorded"] == 1

    # today's publication: a live run, its counts and publisher date
    publish(today, "MU-3", "A", "B")
    meta = materialised(dg.materialize([asset], instance=instance), LEDGER)
    runs = ledger.source("larimer").runs()
    assert [r.kind for r in runs] == [fl.RunKind.BACKFILL, fl.RunKind.LIVE]
    assert (meta["status"], meta["kind"]) == ("applied", "live")
    assert meta["run_id"] == runs[-1].run_id
    assert (meta["added"], meta["changed"], meta["deleted"], meta["changes"]) == (1, 1, 0, 2)
    assert meta["publisher_date"] == midnight(today).timestamp()
    assert meta["run_page"] == page + runs[-1].run_id

    # nothing new: a success that changes nothing and starts no run
    meta = materialised(dg.materialize([asset], instance=instance), LEDGER)
    assert meta["changes"] == 0
    assert len(ledger.source("larimer").runs()) == 2
    # the asset's data version is the payload at the watermark
    event = instance.get_latest_materialization_event(LEDGER)
    assert event is not None and event.asset_materialization is not None
    version = event.asset_materialization.tags["dagster/data_version"]
    assert version == ledger.source("larimer").watermark().payload_id


def test_the_publisher_is_observed_as_its_newest_publication_nothing_applied(
    resource: FeedledgerResource,
    ledger: fl.Ledger,
    publish: Any,
    instance: dg.DagsterInstance,
) -> None:
    defs = feedledger_assets(resource, sources=["larimer"])
    (publisher,) = [a for a in defs.assets or [] if isinstance(a, dg.SourceAsset)]
    assert publisher.key == PUBLISHER

    job = dg.define_asset_job("observe", selection=dg.AssetSelection.assets(PUBLISHER))
    observing = dg.Definitions(assets=[publisher], jobs=[job], resources={"feedledger": resource})

    def observed() -> tuple[str, dict[str, Any]]:
        run = observing.resolve_job_def("observe").execute_in_process(instance=instance)
        (event,) = run.get_asset_observation_events()
        obs = event.event_specific_data.asset_observation
        return obs.tags["dagster/data_version"], {k: v.value for k, v in obs.metadata.items()}

    publish(date(2026, 8, 1), "R-1")
    version, meta = observed()
    assert meta["publication"] == "2026-08-01" and meta["via"] == "listing"
    assert meta["publisher_date"] == midnight(date(2026, 8, 1)).timestamp()
    assert observed()[0] == version  # nothing published since: the same version
    publish(date(2026, 8, 2), "R-2")
    newer, meta = observed()
    assert newer != version and meta["publication"] == "2026-08-02"
    # observing archives and applies nothing
    src = ledger.source("larimer")
    assert src.archive_list() == [] and src.runs() == []


def test_a_translator_names_and_groups_the_assets(resource: FeedledgerResource) -> None:
    class County(FeedledgerTranslator):
        prefix = ("counties",)

        def get_group_name(self, source: fl.SourceConfig) -> str:
            return f"county_{source.name}"

        def get_metadata(self, source: fl.SourceConfig) -> dict[str, Any]:
            return {**super().get_metadata(source), "owner": "gis-team"}

    defs = feedledger_assets(resource, sources=["larimer"], translator=County())
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {
        "counties/larimer",
        "counties/larimer/publisher",
        "counties/larimer/publications",
    }
    ledger_key = dg.AssetKey(["counties", "larimer"])
    node = graph.get(ledger_key)
    assert node.group_name == "county_larimer"
    assert node.metadata["owner"] == "gis-team"
    assert node.metadata["feedledger/cadence"] == "daily"
    checks = {c.name for c in graph.get_check_keys_for_assets({ledger_key})}
    assert checks == {"fresh", "no_unrecorded_gaps", "no_held_burst"}


def test_a_resource_opened_from_a_store_url_and_an_archive(
    workspace: Workspace, ledger: fl.Ledger, publish: Any, instance: dg.DagsterInstance
) -> None:
    resource = FeedledgerResource(
        store=workspace.store_url,
        archive=workspace.archive_location,
        sources_from=str(workspace.config_path),
    )
    assert [c.name for c in resource.declarations()] == ["larimer"]
    publish(date(2026, 8, 1), "R-1")
    asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(LEDGER)
    meta = materialised(dg.materialize([asset], instance=instance), LEDGER)
    (run,) = ledger.source("larimer").runs()  # the same store as the workspace's
    assert meta["run_id"] == run.run_id
    assert len(ledger.source("larimer").archive_list()) == 1  # the same archive too
