"""The sensor that adds a partition to a source's publications asset when a new
publication is archived (by a run, the scheduler, `archive add` or a backfill's fetch).

Each tick lists the archive (`Source.archive_list`: the store's payload index, no
payload read) and the publication calendar, and for the publication dates Dagster
does not know yet:

* adds them as dynamic partitions, oldest first (before the tick's events name them);
* those already applied (by a live run, a backfill, or held for review) are reported as
  materialised, naming the run that applied them -- Dagster learns of the ledger's
  work, it does not repeat it;
* those waiting (archived after the watermark, not applied) get ONE run request over
  their range: one feedledger backfill applies them, oldest first.
"""

import dagster as dg
from dagster import SensorEvaluationContext

import feedledger as fl
from feedledger.api.calendar import DayState
from feedledger.dagster.resource import FeedledgerResource
from feedledger.dagster.windows import partition_key

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"


def publications_sensor(
    cfg: fl.SourceConfig,
    key: dg.AssetKey,
    partitions: dg.DynamicPartitionsDefinition,
    name: str,
    interval_s: int,
) -> dg.SensorDefinition:
    source, tz = cfg.name, cfg.timezone
    assert partitions.name is not None
    partitions_name: str = partitions.name

    @dg.sensor(
        name=name,
        minimum_interval_seconds=interval_s,
        asset_selection=[key],
        description=f"Adds a partition of {key.to_user_string()} for each publication of "
        f"{source} archived, and applies the waiting ones as one backfill.",
    )
    def _sensor(
        context: SensorEvaluationContext, feedledger: FeedledgerResource
    ) -> dg.SensorResult | dg.SkipReason:
        res = feedledger  # the resource under the key `feedledger`
        with res.ledger() as led:
            src = led.source(source)
            archived = src.archive_list()
            known = set(context.instance.get_dynamic_partitions(partitions_name))
            fresh = sorted({partition_key(p.published_at, tz) for p in archived} - known)
            if not fresh:
                return dg.SkipReason(f"no new publication of {source} archived")
            cal = src.calendar()
        by_day = {d.day.isoformat(): d for d in cal.days}
        applied = (DayState.LIVE, DayState.BACKFILL, DayState.HELD)
        events: list[dg.AssetMaterialization] = []
        waiting: list[str] = []
        for day in fresh:
            cell = by_day.get(day)
            if cell is not None and cell.state in applied:
                events.append(
                    dg.AssetMaterialization(
                        asset_key=key,
                        partition=day,
                        description=f"applied by feedledger run {cell.run_id}",
                        metadata={
                            "run_id": cell.run_id or "",
                            "state": cell.state.value,
                            "payload_id": cell.payload_id or "",
                            **_link(res, cell.run_id),
                        },
                    )
                )
            elif cell is not None and cell.state is DayState.WAITING:
                waiting.append(day)
        requests: list[dg.RunRequest] = []
        if waiting:
            lo, hi = waiting[0], waiting[-1]
            requests.append(
                dg.RunRequest(
                    run_key=f"{source}:{lo}..{hi}",
                    asset_selection=[key],
                    tags={RANGE_START: lo, RANGE_END: hi},
                )
            )
        # added here, not as the result's request: Dagster's daemon reports a result's
        # asset events before it adds its partitions, and these events name them
        context.instance.add_dynamic_partitions(partitions_name, fresh)
        return dg.SensorResult(run_requests=requests, asset_events=events)

    return _sensor


def _link(res: FeedledgerResource, run_id: str | None) -> dict[str, dg.MetadataValue]:
    page = res.run_page(run_id)
    return {} if page is None else {"run_page": dg.MetadataValue.url(page)}
