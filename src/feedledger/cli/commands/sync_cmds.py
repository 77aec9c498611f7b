"""`feedledger destination add|list|remove`, `manifest create|show|list`, `sync`,
`sync-explain`, `reconcile`: guarded projections of the ledger into a search table,
through the public API (`Ledger.destination(...)`, api/destination.py), rendered."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from feedledger.cli.commands import sync_render as render
from feedledger.cli.common import JSON_OPT, emit_json, err, ledger, out, table
from feedledger.model.errors import ConfigError

if TYPE_CHECKING:
    from feedledger.api.destination import RebuildProgress


def destination_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Destination name."),
    source: str = typer.Option(..., "--source", help="The source it projects."),
    postgres: str | None = typer.Option(
        None, "--postgres", help="PostgreSQL URL (put the password in PGPASSWORD, not here)."
    ),
    sqlite: str | None = typer.Option(None, "--sqlite", help="SQLite file (embedded default)."),
    gpkg: str | None = typer.Option(
        None,
        "--gpkg",
        help="GeoPackage file (created if absent): a layer QGIS opens while it is updated.",
    ),
    tantivy: str | None = typer.Option(
        None,
        "--tantivy",
        help="Folder of a tantivy full-text index (created if absent): `feedledger search`.",
    ),
    postgis: str | None = typer.Option(
        None,
        "--postgis",
        help="PostgreSQL URL of a database with PostGIS: a GIS source's layer as a table with "
        "a typed geom column, for QGIS.",
    ),
    table_name: str | None = typer.Option(
        None, "--table", help="Table (created if absent); with --postgres, --sqlite or --postgis."
    ),
    layer: str | None = typer.Option(
        None, "--layer", help="The GeoPackage's feature layer (created if absent); with --gpkg."
    ),
    srid: int | None = typer.Option(
        None,
        "--srid",
        help="The geom column's SRID, with --postgis (default: the source's EPSG code; "
        "another one is reprojected with ST_Transform).",
    ),
    text_fields: str | None = typer.Option(
        None,
        "--text-fields",
        help="Fields searched (PostgreSQL: a tsvector with a GIN index; tantivy: one "
        "field each, `field:word` queries).",
    ),
    transform: str | None = typer.Option(
        None, "--transform", help="MODULE:FUNCTION mapping a version to a document."
    ),
    generation: str = typer.Option(
        "M-1", "--generation", help="Transform generation, ordered by its number (M-3 < M-4)."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Declare a destination and create (or check) its table or GeoPackage layer. Its
    live route starts now; what the ledger already holds is written by `sync --manifest`.

    Examples: `--sqlite search.db --table parcels`, `--postgres URL --table parcels`,
    `--gpkg parcels.gpkg --layer parcels` (a GIS source's features, for QGIS),
    `--tantivy ./index --text-fields name,zone` (a full-text index: `feedledger search`),
    `--postgis URL --table parcels [--srid 4326]` (a GIS source's layer as a PostGIS table)."""
    with ledger(ctx) as led:
        dest = led.add_destination(
            name,
            source=source,
            postgres=postgres,
            sqlite=sqlite,
            gpkg=gpkg,
            layer=layer,
            tantivy=tantivy,
            postgis=postgis,
            srid=srid,
            table=table_name,
            text_fields=text_fields,
            transform=transform,
            generation=generation,
        ).declared
    if json_out:
        emit_json(dest.to_json())
    else:
        what = {"gpkg": "layer", "tantivy": "index"}.get(dest.kind, "table")
        where = dest.url if dest.kind == "tantivy" else dest.table
        out.print(f"destination {dest.name}: {dest.kind} {what} {where} for {dest.source}")


def destination_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Destinations, by name."""
    with ledger(ctx) as led:
        items = [d.declared for d in led.destinations()]
    if json_out:
        emit_json([d.to_json() for d in items])
        return
    rows = [[d.name, d.source, d.kind, d.table, d.generation, str(d.paused_at is not None)]
            for d in items]  # fmt: skip
    table("destinations", ["name", "source", "kind", "table", "generation", "paused"], rows)


def destination_remove(ctx: typer.Context, name: str) -> None:
    """Forget a destination (its table is left as it is)."""
    with ledger(ctx) as led:
        led.remove_destination(name)
    out.print(f"removed destination {name}")


def manifest_create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Manifest name."),
    source: str = typer.Option(..., "--source", help="Whose population."),
    generation: str | None = typer.Option(
        None, "--transform-generation", help="Default: the source's destination's."
    ),
    keys_from: Path | None = typer.Option(
        None, "--keys-from", help="One key per line (default: every key live now)."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Freeze a population: its keys, the source boundary (watermark and payload, and the
    transaction time) and the transform generation."""
    with ledger(ctx) as led:
        man = led.create_manifest(name, source=source, generation=generation, keys_from=keys_from)
    if json_out:
        emit_json(man.to_json())
    else:
        kind = "reconstructible snapshot" if man.reconstructible else "population of keys only"
        out.print(f"manifest {man.name}: {man.population:,} keys of {man.source} ({kind})")


def manifest_show(ctx: typer.Context, name: str, json_out: bool = JSON_OPT) -> None:
    """A manifest: boundary, generation, population, and whether it is reconstructible."""
    with ledger(ctx) as led:
        data = led.manifest(name).to_json()
    if json_out:
        emit_json(data)
        return
    render.manifest(data)


def manifest_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Manifests, by name."""
    with ledger(ctx) as led:
        items = led.manifests()
    if json_out:
        emit_json([m.to_json() for m in items])
        return
    rows = [[m.name, m.source, str(m.population), m.generation, str(m.reconstructible)]
            for m in items]  # fmt: skip
    table("manifests", ["name", "source", "population", "generation", "reconstructible"], rows)


@contextmanager
def _progress(quiet: bool, label: str, every_s: float) -> Iterator[RebuildProgress | None]:
    """A progress bar on a terminal; otherwise (a log) a plain line every `every_s`
    seconds (0: none), on stderr whatever --json says (stdout stays JSON only)."""
    if not err.is_terminal:
        if every_s <= 0:
            yield None
            return
        yield render.ProgressLog(label, every_s, lambda line: err.print(line, markup=False))
        return
    if quiet:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # lazy: bars only

    columns = (
        TextColumn("rebuild"),
        BarColumn(),
        MofNCompleteColumn(),
        render.rate_column("keys"),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("", total=None)

        def step(done: int, total: int, lag: float) -> None:
            bar.update(task, completed=done, total=total, description=f"live lag {lag:.1f} s")

        yield step


def sync(
    ctx: typer.Context,
    destination: str = typer.Argument(..., help="Destination name."),
    live: bool = typer.Option(False, "--live", help="Drain the live route."),
    once: bool = typer.Option(False, "--once", help="With --live: drain, then exit."),
    manifest: str | None = typer.Option(None, "--manifest", help="Rebuild this population."),
    rate: str | None = typer.Option(None, "--rate", help="Capacity in documents/s, e.g. 5000/s."),
    live_reserve: float = typer.Option(
        0.3, "--live-reserve", min=0.0, max=0.95, help="Share of --rate kept for the live route."
    ),
    recovery_window: float = typer.Option(
        60.0, "--recovery-window", help="Live lag (s) above which the rebuild waits."
    ),
    maintenance: bool = typer.Option(
        False, "--maintenance", help="Pause the live route to it meanwhile (queued, not lost)."
    ),
    batch: int = typer.Option(20_000, "--batch", min=1, help="Documents per checkpointed batch."),
    progress_every: float = typer.Option(
        10.0,
        "--progress-every",
        min=0.0,
        help="A rebuild with stderr not a terminal logs a progress line this often (s; 0: never).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Write ledger state into a destination through its guard: `--live` (the changes of
    every run since the last sync) or `--manifest NAME` (a rebuild, checkpointed).

    `--live` without `--once` polls until SIGTERM or Ctrl-C, then finishes the step under
    way (its keys written, its cursor moved), prints its report and exits 0. The report
    counts what this call did."""
    if live == (manifest is not None):
        raise ConfigError("give exactly one of --live or --manifest NAME")
    per_s = None
    if rate:
        try:
            per_s = float(rate.strip().removesuffix("/s"))
        except ValueError:
            raise ConfigError(f"--rate {rate!r} must be a number of documents per second") from None
    label = f"rebuild {destination} / {manifest}"
    with (
        ledger(ctx) as led,
        _progress(json_out, label, progress_every if manifest else 0) as step,
    ):
        dest = led.destination(destination)
        if manifest is None:
            report = dest.sync_live(once=once, stop=None if once else _stop_on_signals())
        else:

            def on_resume(name: str, at: int, batches: int, done: int, population: int) -> None:
                err.print(render.resuming(name, at, batches, done, population), markup=False)
                if step is not None:  # the bar starts there: its rate counts this run's keys
                    step(done, population, 0.0)

            report = dest.rebuild(
                manifest,
                on_resume=on_resume,
                rate=per_s,
                live_reserve=live_reserve,
                recovery_window_s=recovery_window,
                maintenance=maintenance,
                progress=step,
                batch=batch,
            )
    data = report.to_json()
    if data["rejected_before_write"]:
        err.print(
            f"warning: destination {data['destination']}: {data['rejected_before_write']:,} "
            f"document(s) rejected, not written; first: {data['first_rejection']}",
            markup=False,
        )
    if json_out:
        emit_json(data)
        return
    render.sync(data)


def _stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set (instead of killing the process)."""
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return stopping


def sync_explain(
    ctx: typer.Context,
    destination: str = typer.Argument(..., help="Destination name."),
    key: str = typer.Argument(..., help="The key (a compound one as a JSON array)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Why the destination holds what it holds for KEY: the row held and the guard's last
    verdict per route (live, each manifest rebuild) with its reason, the incoming
    revision, generation and content hash, and when. Exit 3 if nothing is known."""
    with ledger(ctx) as led:
        data = led.destination(destination).explain(key).to_json()
    if json_out:
        emit_json(data)
    else:
        render.explain(data)


def reconcile(
    ctx: typer.Context,
    destination: str = typer.Argument(..., help="Destination name."),
    manifest: str = typer.Option(..., "--manifest", help="The population to account for."),
    json_out: bool = JSON_OPT,
) -> None:
    """Prove a destination complete for a manifest: outcome counts that add up, and no
    missing, extra, duplicate, stale, wrong-generation or unresolved record. Exit 1 if
    it is not complete."""
    with ledger(ctx) as led:
        result = led.destination(destination).reconcile(manifest)
    if json_out:
        emit_json(result.to_json())
    else:
        render.reconcile(result.to_json())
    if not result.complete:
        raise typer.Exit(1)
