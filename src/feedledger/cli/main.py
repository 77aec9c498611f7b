"""`feedledger` command: workspace, sources and the store's schema.

Every query command has `--json`; errors are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import NoReturn

import typer

from feedledger.cli import common
from feedledger.cli.app import (
    app,
    archive_app,
    db_app,
    destination_app,
    manifest_app,
    notify_app,
    source_app,
    subscriber_app,
)
from feedledger.cli.common import JSON_OPT, emit_json, err, guarded, out, table, workspace
from feedledger.config import Workspace, make_source
from feedledger.model.errors import FeedledgerError
from feedledger.model.source import (
    DEFAULT_FETCH_DEADLINE_S,
    DEFAULT_MAX_PAYLOAD_BYTES,
    SourceConfig,
)

# The command modules register their commands on cli/app.py's groups when imported;
# `--help` lists the commands in this order.
COMMAND_MODULES = (
    "ledger_cmds",
    "entity_cmds",
    "recovery_cmds",
    "gap_cmds",
    "scheduler_cmds",
    "sync_cmds",
    "demo_cmd",
    "archive_cmds",
    "notify_cmds",
)


def _adopt(module: object, name: str, group: typer.Typer) -> None:
    """Transitional (issue 14 phase 2): the commands of a module's own sub-group join
    cli/app.py's (a no-op once the module registers on that group)."""
    legacy = getattr(module, name, group)
    if legacy is not group and legacy is not app:
        group.registered_commands.extend(legacy.registered_commands)


def _register_legacy(module: object) -> None:
    """Transitional: a module still exposing `register(app)` registers on a staging
    Typer; its commands join the root (its sub-groups are adopted by `_adopt`)."""
    register = getattr(module, "register", None)
    if register is not None:
        staging = typer.Typer()
        register(staging)
        app.registered_commands.extend(staging.registered_commands)


for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"feedledger.cli.{_name}")
    _register_legacy(_module)
    _adopt(_module, "app", archive_app)
    _adopt(_module, "subscriber_app", subscriber_app)
    _adopt(_module, "notify_app", notify_app)
    _adopt(_module, "destination_app", destination_app)
    _adopt(_module, "manifest_app", manifest_app)


@app.command()
@guarded
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
    from feedledger.archive import open_archive
    from feedledger.ledger import engine as eng

    root = directory.resolve()
    if store:
        probe = eng.make_engine(store)
        eng.check_reachable(probe, store)
        probe.dispose()
    ws = Workspace.create(
        root, store_url=store, archive=archive, archive_endpoint_url=archive_endpoint
    )
    try:
        # a folder is created; a bucket must exist and answer with these credentials
        open_archive(ws.archive_location, endpoint_url=ws.archive_endpoint_url).prepare()
        engine = eng.make_engine(ws.store_url)
        eng.check_reachable(engine, ws.store_url)
        _before, after = eng.upgrade(engine)
        engine.dispose()
    except FeedledgerError:
        ws.config_path.unlink(missing_ok=True)
        raise
    result = {
        "config": str(ws.config_path),
        "store": eng.redact(ws.store_url),
        "archive": ws.archive_location,
        "schema": after,
    }
    if json_out:
        emit_json(result)
        return
    out.print(f"Created {ws.config_path}")
    out.print(f"  store   {result['store']} (schema {after})")
    out.print(f"  archive {ws.archive_location}")
    out.print("Next: feedledger source add NAME --key FIELD [--format csv] ...")


@db_app.command("upgrade")
@guarded
def db_upgrade(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Create or upgrade the store's schema to this version's head revision."""
    from feedledger.ledger import engine as eng

    ws = workspace(ctx)
    engine = eng.make_engine(ws.store_url)
    eng.check_reachable(engine, ws.store_url)
    before, after = eng.upgrade(engine)
    engine.dispose()
    if json_out:
        emit_json({"store": eng.redact(ws.store_url), "before": before, "after": after})
    else:
        out.print(f"schema {before or '(empty)'} -> {after}")


@db_app.command("current")
@guarded
def db_current(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Show the schema revision of the store and the one this version needs."""
    from feedledger.ledger import engine as eng

    ws = workspace(ctx)
    engine = eng.make_engine(ws.store_url, create=False)
    eng.check_reachable(engine, ws.store_url)
    current = eng.current_revision(engine)
    engine.dispose()
    data = {"store": eng.redact(ws.store_url), "current": current, "head": eng.head_revision()}
    if json_out:
        emit_json(data)
    else:
        out.print(f"current {current or '(empty)'}, head {data['head']}")


def _source_json(src: SourceConfig) -> dict[str, object]:
    data = src.model_dump(mode="json")
    data["key"] = list(src.key)
    return data


def _warn_fetch(src: SourceConfig) -> None:
    """A local fetch location that does not exist is worth a warning now (it may be a
    mount that is not there yet, so not an error); URLs are not probed."""
    location = (src.fetch or "").removeprefix("file://")
    if not location or "://" in location:
        return
    from feedledger.sources.templates import is_template

    folder = Path(location).expanduser()
    if is_template(location):
        # the folder above the first {date} field (which may name a file or a folder)
        folder = Path(location.split("{date", 1)[0] + "_").expanduser().parent
    if not folder.is_dir():
        err.print(
            f"[yellow]warning:[/] fetch location {folder} does not exist (yet): "
            "`run` and the scheduler will fail until it does",
            markup=True,
        )


@source_app.command("add")
@guarded
def source_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Source name, e.g. larimer."),
    key: str = typer.Option(..., "--key", help="Key field(s), comma-separated: a,b."),
    fmt: str = typer.Option("csv", "--format", help="csv | jsonl | json | parquet."),
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
    published_from: str = typer.Option(
        "filename",
        "--published-from",
        help="Where the publisher date comes from: filename | field:NAME | header:Last-Modified.",
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
    replace: bool = typer.Option(False, "--replace", help="Replace an existing declaration."),
    json_out: bool = JSON_OPT,
) -> None:
    """Declare a source in feedledger.toml (validated; clear errors on bad values)."""
    ws = workspace(ctx)
    src = make_source(
        name,
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
    )
    ws.add_source(src, replace=replace)
    _warn_fetch(src)
    if json_out:
        emit_json(_source_json(src))
    else:
        out.print(
            f"Declared source {name} (key {', '.join(src.key)}; {src.format}, "
            f"{src.kind}) in {ws.config_path}"
        )


@source_app.command("list")
@guarded
def source_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """List declared sources."""
    ws = workspace(ctx)
    items = [_source_json(s) for s in ws.sources.values()]
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


@source_app.command("remove")
@guarded
def source_remove(ctx: typer.Context, name: str) -> None:
    """Remove a source's declaration (its history stays in the ledger)."""
    ws = workspace(ctx)
    ws.remove_source(name)
    err.print(f"Removed source {name} from {ws.config_path}; its history is kept.")


def main() -> None:
    """The console entry point. A CLI process is short-lived, so the cyclic garbage
    collector is off (reference counting frees what it uses; the collector's passes over
    the libraries' objects cost a quarter of a second), and once the command has
    finished and its output is flushed the process ends at once rather than tearing
    the interpreter down piece by piece. Every write has committed (or rolled back)
    before the command returns; an SQLite store keeps its write-ahead log for the next
    writer to checkpoint (see `Store.close`)."""
    import gc

    gc.disable()
    common.LEAVE_WAL = True
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    _finish(code)


def _finish(code: int) -> NoReturn:
    from feedledger import timing

    timing.report()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
