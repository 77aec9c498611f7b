"""Workspace commands: `init`, `db upgrade|current` (the store's schema) and
`source add|list|remove` (declarations in feedledger.toml), over the public API."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from feedledger.cli.common import JSON_OPT, config_path, emit_json, err, ledger, out, table
from feedledger.model.defaults import (
    DEFAULT_FETCH_DEADLINE_S,
    DEFAULT_GEOMETRY_GRID,
    DEFAULT_MAX_PAYLOAD_BYTES,
)

if TYPE_CHECKING:
    from feedledger.model.source import SourceConfig


def init(
    store: str | None = typer.Option(
        None,
        "--store",
        help="Store URL: sqlite:///PATH (default .feedledger/ledger.db) "
        "or postgresql://user@host:port/db.",
    ),
    archive: str | None = typer.Option(
        None,
        "--archive",
        help="Archive folder (default .feedledger/archive), or s3://BUCKET/PREFIX on "
        "S3-compatible storage (credentials from the AWS environment variables or profile).",
    ),
    archive_endpoint: str | None = typer.Option(
        None,
        "--archive-endpoint",
        help="Endpoint of a non-AWS object store (MinIO...), saved as [archive] endpoint_url; "
        "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL take precedence.",
    ),
    directory: Path = typer.Option(Path("."), "--dir", help="Workspace folder."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create feedledger.toml, the store (schema via Alembic) and the archive folder (or
    check that the archive's bucket answers)."""
    from feedledger.api.workspace import create  # lazy: --help loads no API

    _ws, created = create(
        directory, store=store, archive=archive, archive_endpoint_url=archive_endpoint
    )
    result = created.to_json()
    if json_out:
        emit_json(result)
        return
    out.print(f"Created {created.config}")
    out.print(f"  store   {created.store} (schema {created.schema})")
    out.print(f"  archive {created.archive}")
    out.print("Next: feedledger source add NAME --key FIELD [--format csv] ...")


def db_upgrade(
    ctx: typer.Context,
    wait: float = typer.Option(
        0.0,
        "--wait",
        metavar="SECONDS",
        help="Refused because older schedulers hold leases: retry until they let go, "
        "at most this long.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Upgrade even while schedulers of an older schema hold leases (they stop "
        "at their next lease; see docs/upgrading.md).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Create or upgrade the store's schema to this version's head revision.

    Refused (exit 7, nothing changed) while a pending migration is incompatible with
    the schema of a feedledger that holds a live lease; compatible migrations go ahead
    beside the running schedulers (docs/upgrading.md)."""
    from feedledger.api.workspace import upgrade_schema  # lazy: --help loads no API

    change = upgrade_schema(config_path(ctx), wait_s=max(0.0, wait), force=force)
    if json_out:
        emit_json(change.to_json())
    else:
        out.print(f"schema {change.before or '(empty)'} -> {change.after}")


def db_current(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Show the schema revision of the store and the one this version needs."""
    from feedledger.api.workspace import schema_state  # lazy: --help loads no API

    state = schema_state(config_path(ctx))
    if json_out:
        emit_json(state.to_json())
    else:
        out.print(f"current {state.current or '(empty)'}, head {state.head}")


def _source_json(src: SourceConfig) -> dict[str, object]:
    data = src.model_dump(mode="json")
    data["key"] = list(src.key)
    return data


def _warn_fetch(src: SourceConfig) -> None:
    """A local fetch location that does not exist is worth a warning now (it may be a
    mount that is not there yet, so not an error); URLs are not probed."""
    from feedledger.api.workspace import missing_fetch_folder  # lazy: --help loads no API

    folder = missing_fetch_folder(src)
    if folder is not None:
        err.print(
            f"[yellow]warning:[/] fetch location {folder} does not exist (yet): "
            "`run` and the scheduler will fail until it does",
            markup=True,
        )


def source_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Source name, e.g. larimer."),
    key: str = typer.Option(..., "--key", help="Key field(s), comma-separated: a,b."),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="csv | jsonl | json | parquet | geojson | geojsonseq | shapefile | gpkg | "
        "filegdb | flatgeobuf | geoparquet (default: from --fetch's extension, else csv).",
    ),
    kind: str = typer.Option(
        "snapshot",
        "--kind",
        help="snapshot (complete: absence = deleted) | changes (only explicit delete "
        'markers `_deleted: true` or `op: "d"` delete).',
    ),
    timezone: str = typer.Option(
        "UTC", "--timezone", help="IANA zone for dates without a time (00:00 there)."
    ),
    cadence: str = typer.Option(
        "daily", "--cadence", help='daily | weekdays | a cron expression "0 6 * * 1-5".'
    ),
    revision: str | None = typer.Option(
        None, "--revision", help="Per-record revision field (newer wins)."
    ),
    fetch: str | None = typer.Option(
        None,
        "--fetch",
        help="Directory or http(s) URL for `feedledger run` and the scheduler; `{date}` or "
        "`{date:%Y%m%d}` in it reaches each day's publication (backfills fetch missed ones).",
    ),
    published_from: str | None = typer.Option(
        None,
        "--published-from",
        help="Where the publisher date comes from: filename (the default) | field:NAME | "
        "header:Last-Modified; a --connector source: its portal's date (connector, the "
        "default) or field:NAME.",
    ),
    mass_delete: float = typer.Option(
        0.5,
        "--mass-delete-threshold",
        help="Refuse snapshots deleting more than this share of live entities.",
    ),
    hold_factor: float = typer.Option(
        10.0,
        "--hold-factor",
        help="Hold a live run for review when its changes exceed this many times the median "
        "of the last 30 runs...",
    ),
    hold_min_changes: int = typer.Option(
        100, "--hold-min-changes", help="...and exceed this many changes."
    ),
    publish_at: str = typer.Option(
        "00:00", "--publish-at", help="Local time HH:MM a day's publication is due (scheduler)."
    ),
    fetch_window: float | None = typer.Option(
        None,
        "--fetch-window",
        help="Hours to keep retrying a late publication (default: until the next is due).",
    ),
    retry: float = typer.Option(
        300.0, "--retry", help="First retry after a failed or early fetch, seconds (doubles)."
    ),
    stale_after: int = typer.Option(
        1, "--stale-after", help="Stale (health fails, alert) past this many missed publications."
    ),
    recovery: str = typer.Option(
        "auto",
        "--recovery",
        help="Missed publications: auto (fill the archive, backfill) | hold (alert, wait).",
    ),
    max_payload_bytes: int = typer.Option(
        DEFAULT_MAX_PAYLOAD_BYTES,
        "--max-payload-bytes",
        help="Refuse a fetched payload larger than this (checked while it downloads).",
    ),
    fetch_deadline: float = typer.Option(
        DEFAULT_FETCH_DEADLINE_S,
        "--fetch-deadline",
        help="Give up a fetch that takes longer than this many seconds in all.",
    ),
    csv_delimiter: str = typer.Option(
        ",",
        "--csv-delimiter",
        help="CSV field separator, one character: ';', '|', or tab (`tab` or `\\t`).",
    ),
    encoding: str = typer.Option(
        "utf-8",
        "--encoding",
        help="Text encoding of the payloads (utf-8, latin-1, cp1252, utf-16...).",
    ),
    connector: str | None = typer.Option(
        None,
        "--connector",
        help="socrata | ckan | arcgis: --fetch names a portal dataset (https://HOST/resource/"
        "abcd-1234.json, https://HOST/dataset/NAME with --resource, or an ArcGIS layer "
        "https://HOST/.../FeatureServer/0).",
    ),
    resource: str | None = typer.Option(
        None, "--resource", help="CKAN only: the dataset's resource to fetch (name or id)."
    ),
    page_size: int | None = typer.Option(
        None, "--page-size", help="Socrata only: rows per request (default 50,000)."
    ),
    layer: str | None = typer.Option(
        None, "--layer", help="GIS files with several layers: the layer to read."
    ),
    geometry_grid: float = typer.Option(
        DEFAULT_GEOMETRY_GRID,
        "--geometry-grid",
        help="GIS: coordinates are snapped to this grid (layer units) before geometries "
        "are compared; 1e-9 suits degrees, use e.g. 0.001 for a layer in metres or feet.",
    ),
    token_env: str | None = typer.Option(
        None,
        "--token-env",
        help="ArcGIS only: environment variable holding the service's token (never the "
        "token itself).",
    ),
    memory_budget: str | None = typer.Option(
        None,
        "--memory-budget",
        help="Bound the memory one payload's diff may use (e.g. 1GiB): a larger payload is "
        "diffed in key-hash partitions, a CSV one read in batches (slower). Default: a "
        "payload of 256MiB or more is bounded to 1GiB, a smaller one is not "
        "(FEEDLEDGER_MEMORY_BUDGET, FEEDLEDGER_MEMORY_BUDGET_FROM change it).",
    ),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing declaration."),
    json_out: bool = JSON_OPT,
) -> None:
    """Declare a source in feedledger.toml (validated; clear errors on bad values)."""
    with ledger(ctx) as led:
        src = led.add_source(
            name,
            replace=replace,
            key=tuple(k for k in key.split(",")),
            format=fmt,
            kind=kind,
            timezone=timezone,
            cadence=cadence,
            revision=revision,
            fetch=fetch,
            published_from=published_from,
            mass_delete_threshold=mass_delete,
            hold_factor=hold_factor,
            hold_min_changes=hold_min_changes,
            publish_at=publish_at,
            fetch_window_h=fetch_window,
            retry_s=retry,
            stale_after=stale_after,
            recovery=recovery,
            max_payload_bytes=max_payload_bytes,
            fetch_deadline_s=fetch_deadline,
            connector=connector,
            resource=resource,
            page_size=page_size,
            csv_delimiter=csv_delimiter,
            encoding=encoding,
            layer=layer,
            geometry_grid=geometry_grid,
            token_env=token_env,
            memory_budget=memory_budget,
        ).config
        config = led.workspace.config_path
    _warn_fetch(src)
    if json_out:
        emit_json(_source_json(src))
    else:
        out.print(
            f"Declared source {name} (key {', '.join(src.key)}; {src.format}, "
            f"{src.kind}) in {config}"
        )


def source_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """List declared sources."""
    with ledger(ctx) as led:
        items = [_source_json(s) for s in led.sources(by_name=False)]
    if json_out:
        emit_json(items)
        return
    table(
        "sources",
        ["name", "key", "format", "kind", "timezone", "cadence", "revision", "fetch"],
        [
            [
                s["name"],
                ",".join(s["key"]),  # type: ignore[arg-type]
                s["format"],
                s["kind"],
                s["timezone"],
                s["cadence"],
                s["revision"],
                s["fetch"],
            ]
            for s in items
        ],
    )


def source_remove(ctx: typer.Context, name: str) -> None:
    """Remove a source's declaration (its history stays in the ledger)."""
    with ledger(ctx) as led:
        led.remove_source(name)
        config = led.workspace.config_path
    err.print(f"Removed source {name} from {config}; its history is kept.")
