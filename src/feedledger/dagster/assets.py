"""`feedledger_assets(resource, sources=[...])`: a source's assets, checks and sensor.

Per source (names from the `FeedledgerTranslator`):

* the publisher, an observable source asset: `Source.peek()` asks the publisher what
  it publishes now (nothing archived or applied) and its `DataVersion` is the version
  stated -- the ETag, a portal's edit date (`dataLastEditDate`, `rowsUpdatedAt`), the
  newest dated file -- so Dagster sees when the county published;
* the source's ledger, materialised by `Source.run()`: a live run, or the catch-up the
  scheduler would do when several publications wait (one backfill); its metadata holds
  the run id, the counts, the publisher date and the dashboard's run page;
* its publications, one dynamic partition per publication date, with a single-run
  backfill policy: a partition range Dagster backfills, in whatever order it launches
  the keys, is ONE `Source.backfill` over the window (`windows`): one run id, publisher
  order, one summary, gap records -- all feedledger's;
* the checks (`checks`) and the sensor adding partitions (`sensors`);
* per `FeedledgerDestination` of the source: an asset syncing it (`sync_live`), after
  the source's ledger (so a blocking check on the source stops it), checked
  `reconciled` against its named manifest.

Everything is returned as one `dagster.Definitions` (the resource under the key
`feedledger`), to merge with a project's own (`Definitions.merge`).
"""

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext, OpExecutionContext

import feedledger as fl
from feedledger.dagster import checks, metadata, sensors
from feedledger.dagster.resource import FeedledgerResource
from feedledger.dagster.translator import FeedledgerTranslator
from feedledger.dagster.windows import partition_key, publication_day, window

RESOURCE_KEY = "feedledger"


@dataclass(frozen=True)
class FeedledgerDestination:
    """A destination (`feedledger destination add`) to sync after its source, and the
    manifest (`feedledger manifest create`) its `reconciled` check compares it over."""

    name: str
    manifest: str | None = None


def feedledger_assets(
    resource: FeedledgerResource,
    *,
    sources: Sequence[str] | None = None,
    destinations: Sequence[FeedledgerDestination] = (),
    translator: FeedledgerTranslator | None = None,
    sensor_interval_s: int = 60,
) -> dg.Definitions:
    """The assets, checks and sensors of `sources` (default: every declared source)
    and of `destinations`, with `resource` as the resource `feedledger`. The
    declarations are read from the workspace now (names, cadences, metadata)."""
    with warnings.catch_warnings():
        # observable source assets and backfill policies are marked beta in Dagster 1.13:
        # said once here (README), not on every definition load
        warnings.simplefilter("ignore", dg.BetaWarning)
        return _definitions(resource, sources, destinations, translator, sensor_interval_s)


def _definitions(
    resource: FeedledgerResource,
    sources: Sequence[str] | None,
    destinations: Sequence[FeedledgerDestination],
    translator: FeedledgerTranslator | None,
    sensor_interval_s: int,
) -> dg.Definitions:
    names = list(sources) if sources is not None else None
    tr = translator or FeedledgerTranslator()
    configs = resource.declarations(names)
    assets: list[dg.AssetsDefinition | dg.SourceAsset] = []
    asset_checks: list[dg.AssetChecksDefinition] = []
    sensor_defs: list[dg.SensorDefinition] = []
    by_name = {c.name: c for c in configs}
    for cfg in configs:
        partitions = dg.DynamicPartitionsDefinition(name=tr.get_partitions_name(cfg))
        assets += [
            publisher_asset(cfg, tr),
            ledger_asset(cfg, tr),
            publications_asset(cfg, tr, partitions),
        ]
        asset_checks += checks.source_checks(cfg, tr.get_asset_key(cfg))
        sensor_name = tr.get_sensor_name(cfg)
        key = tr.get_publications_key(cfg)
        sensor_defs.append(
            sensors.publications_sensor(cfg, key, partitions, sensor_name, sensor_interval_s)
        )
    declared: dict[str, fl.Destination] = {}
    if destinations:
        with resource.ledger() as led:
            declared = {d.name: d for d in led.destinations()}
    for dest in destinations:
        found = declared.get(dest.name)
        if found is None:
            raise fl.NotFoundError(f"no destination {dest.name} is declared")
        source = by_name.get(found.source)
        if source is None:
            raise fl.ConfigError(
                f"destination {dest.name} follows source {found.source}, which is not "
                "among the sources given to feedledger_assets"
            )
        key = tr.get_destination_key(dest.name)
        assets.append(destination_asset(dest, key, tr.get_asset_key(source), tr, source))
        if dest.manifest is not None:
            asset_checks.append(checks.reconciled(dest.name, dest.manifest, key))
    return dg.Definitions(
        assets=assets,
        asset_checks=asset_checks,
        sensors=sensor_defs,
        resources={RESOURCE_KEY: resource},
    )


def _feedledger(context: OpExecutionContext | AssetExecutionContext) -> FeedledgerResource:
    got: FeedledgerResource = getattr(context.resources, RESOURCE_KEY)
    return got


def publisher_asset(cfg: fl.SourceConfig, tr: FeedledgerTranslator) -> dg.SourceAsset:
    """The publisher's newest publication, observed (`Source.peek`)."""
    name = cfg.name

    def observe(context: OpExecutionContext) -> dg.ObserveResult:
        with _feedledger(context).ledger() as led:
            pub = led.source(name).peek()
        data: dict[str, Any] = {"via": pub.via, "version": pub.version}
        if pub.published_at is not None:
            data["publisher_date"] = dg.MetadataValue.timestamp(pub.published_at)
            data["publication"] = partition_key(pub.published_at, cfg.timezone)
        if pub.etag is not None:
            data["etag"] = pub.etag
        return dg.ObserveResult(data_version=dg.DataVersion(pub.version), metadata=data)

    return dg.observable_source_asset(
        key=tr.get_publisher_key(cfg),
        description=f"What the publisher of {name} serves now (observed, never fetched "
        "into the ledger).",
        group_name=tr.get_group_name(cfg),
        metadata=tr.get_metadata(cfg),
        required_resource_keys={RESOURCE_KEY},
    )(observe)


def ledger_asset(cfg: fl.SourceConfig, tr: FeedledgerTranslator) -> dg.AssetsDefinition:
    """The source's ledger, brought up to the publisher: `Source.run()`."""
    name = cfg.name

    @dg.asset(
        key=tr.get_asset_key(cfg),
        deps=[tr.get_publisher_key(cfg)],
        description=tr.get_description(cfg),
        group_name=tr.get_group_name(cfg),
        metadata=tr.get_metadata(cfg),
        tags=tr.get_tags(cfg),
        kinds=tr.get_kinds(cfg),
        required_resource_keys={RESOURCE_KEY},
    )
    def _ledger(context: AssetExecutionContext) -> dg.MaterializeResult[None]:
        res = _feedledger(context)
        with res.ledger() as led:
            src = led.source(name)
            result = src.run()
            wm = src.watermark()
        data = metadata.of_run(result, res.run_page(metadata.run_id_of(result)))
        context.log.info(f"feedledger {name}: {data.get('status')} run {data.get('run_id')}")
        version = dg.DataVersion(wm.payload_id) if wm.payload_id is not None else None
        return dg.MaterializeResult(metadata=data, data_version=version)

    return _ledger


def publications_asset(
    cfg: fl.SourceConfig, tr: FeedledgerTranslator, partitions: dg.DynamicPartitionsDefinition
) -> dg.AssetsDefinition:
    """The source's publications by date: a partition selection is ONE backfill."""
    name, tz = cfg.name, cfg.timezone

    @dg.asset(
        key=tr.get_publications_key(cfg),
        deps=[tr.get_publisher_key(cfg)],
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        description=f"The publications of {name}, one partition per publication date. "
        "A range of partitions is applied as ONE feedledger backfill, in publisher order.",
        group_name=tr.get_group_name(cfg),
        metadata=tr.get_metadata(cfg),
        tags=tr.get_tags(cfg),
        kinds=tr.get_kinds(cfg),
        required_resource_keys={RESOURCE_KEY},
    )
    def _publications(context: AssetExecutionContext) -> dg.MaterializeResult[None]:
        res = _feedledger(context)
        keys = list(context.partition_keys)
        with res.ledger() as led:
            src = led.source(name)
            wm = src.watermark()
            after = None if wm.published_at is None else wm.published_at + timedelta(microseconds=1)
            waiting = src.archive_list(start=after)
            oldest = publication_day(waiting[0].published_at, tz) if waiting else None
            win = window(keys, oldest)
            context.log.info(
                f"feedledger {name}: {len(keys)} partition(s) as one backfill "
                f"{win.start}..{win.end} (watermark {wm.published_at})"
            )
            result = src.backfill(win.start, win.end, fetch=res.backfill_fetch)
        if isinstance(result, fl.WindowRun):
            data = metadata.of_window(result, res.run_page(result.run_id))
        else:
            data = metadata.of_nothing(result)
        data["window"] = f"{win.start.isoformat()}..{win.end.isoformat()}"
        data["partitions"] = len(win.selected)
        if win.extended:
            data["window_note"] = (
                "started at the oldest publication waiting after the watermark: it is "
                "applied first, never skipped"
            )
        return dg.MaterializeResult(metadata=data)

    return _publications


def destination_asset(
    dest: FeedledgerDestination,
    key: dg.AssetKey,
    source_key: dg.AssetKey,
    tr: FeedledgerTranslator,
    source: fl.SourceConfig,
) -> dg.AssetsDefinition:
    """A destination kept in step with its source: `Destination.sync_live(once=True)`."""

    @dg.asset(
        key=key,
        deps=[source_key],
        description=f"feedledger destination {dest.name}: the current state of "
        f"{source.name}, written in revision order.",
        group_name=tr.get_group_name(source),
        kinds=tr.get_kinds(source),
        required_resource_keys={RESOURCE_KEY},
    )
    def _destination(context: AssetExecutionContext) -> dg.MaterializeResult[None]:
        with _feedledger(context).ledger() as led:
            report = led.destination(dest.name).sync_live(once=True)
        outcomes = {o.value: n for o, n in report.outcomes.items()}
        return dg.MaterializeResult(
            metadata={
                "status": report.status.value,
                "live_written": report.live_written,
                "outcomes": outcomes,
            }
        )

    return _destination
