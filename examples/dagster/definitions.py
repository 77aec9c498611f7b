"""feedledger in Dagster: every source of a workspace as assets, checks and a sensor.

    pip install 'feedledger[dagster]'
    export FEEDLEDGER_WORKSPACE=path/to/workspace   # holds feedledger.toml
    dagster definitions validate -f examples/dagster/definitions.py
    dagster dev -f examples/dagster/definitions.py

Per source: `feedledger/<name>/publisher` (observed: the publisher's date or ETag),
`feedledger/<name>` (a live run or catch-up), `feedledger/<name>/publications` (one
partition per publication date; a range backfill is ONE feedledger backfill), the
checks fresh, no_unrecorded_gaps and no_held_burst (blocking), and a sensor adding a
partition per archived publication. `report` below is a downstream asset of one
source: it does not run while that source has a burst held for review.
"""

import os

import dagster as dg

from feedledger.dagster import FeedledgerResource, feedledger_assets

feedledger = FeedledgerResource(
    workspace=os.environ.get("FEEDLEDGER_WORKSPACE", "ws"),
    # `feedledger serve`'s address: materialisations link to its run pages
    dashboard_url=os.environ.get("FEEDLEDGER_DASHBOARD_URL"),
)


def report_of(source: str) -> dg.AssetsDefinition:
    """A downstream asset of `source`: the row count of its snapshot at the watermark."""

    @dg.asset(deps=[dg.AssetKey(["feedledger", source])], group_name="reports")
    def report() -> dg.MaterializeResult:
        with feedledger.ledger() as led:
            src = led.source(source)
            mark = src.watermark().published_at
            rows = 0 if mark is None else src.snapshot(valid=mark).height
        return dg.MaterializeResult(metadata={"rows": rows})

    return report


def build() -> dg.Definitions:
    names = [cfg.name for cfg in feedledger.declarations()]
    reports = [report_of(names[0])] if names else []
    return dg.Definitions.merge(
        feedledger_assets(feedledger, sources=names), dg.Definitions(assets=reports)
    )


defs = build()
