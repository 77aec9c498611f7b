"""Ledger commands: ingest, run, runs, changes, watermark, snapshot, verify (history and
asof are in entity_cmds.py). Each parses its text, calls the public API, renders."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from feedledger.cli.common import (
    JSON_OPT,
    emit_json,
    err,
    instant,
    ledger,
    opt_instant,
    out,
    table,
    warn_invalid_geometries,
    when,
)

if TYPE_CHECKING:
    from feedledger.api.results import Ingested, Recovered, Run, SnapshotGap

# The API's pipeline and ledger modules (Polars, SQLAlchemy) are imported inside its
# calls, so `--help` is quick and `ingest` can import the store's driver while it parses.

FUTURE_OPT = typer.Option(
    False,
    "--allow-future",
    help="Accept a publisher date more than a day after now (refused by default: it would "
    "hold back every later payload).",
)
MASS_OPT = typer.Option(
    False,
    "--allow-mass-delete",
    help="Apply a snapshot even if it deletes more than the source's threshold of entities.",
)


def _render_ingest(result: Ingested, json_out: bool) -> None:
    warn_invalid_geometries(result.source, result.invalid_geometries)
    if json_out:
        emit_json(result.to_json())
        return
    published = result.published_at.isoformat()
    if result.status == "already_applied":
        out.print(
            f"{result.source}: payload {result.payload_id} "
            f"(published {published}) was already applied by run "
            f"{result.applied_by_run}; nothing changed."
        )
        return
    c = result.counts
    out.print(
        f"{result.source}: applied payload {result.payload_id} published "
        f"{published} in run {result.run_id}\n"
        f"  added {c.added:,}  changed {c.changed:,}  "
        f"deleted {c.deleted:,}  unchanged {c.unchanged:,}"
        + (f"  superseded {c.superseded:,}" if c.superseded else "")
        + (
            f"  unresolved {c.unresolved:,} (held, see `feedledger changes --run`)"
            if c.unresolved
            else ""
        )
    )


def _render_recovery(rec: Recovered, json_out: bool) -> None:
    report = rec.backfill
    span = (
        f"{report.steps[0].published_at.isoformat()} .. {report.steps[-1].published_at.isoformat()}"
        if report.steps
        else "none"
    )
    err.print(
        f"[yellow]note:[/] {rec.source}: several publications were waiting "
        f"({len(rec.missed_dates)} publication day(s) since {rec.missed_dates[0]}); applying "
        "only the newest would lose the states in between, so every one the source still "
        "serves was applied oldest first "
        f"as one backfill run ({len(report.steps)} payload(s): {span}; "
        f"{len(report.missing_dates)} day(s) recorded as gaps)",
        markup=True,
    )
    warn_invalid_geometries(rec.source, report.invalid_geometries)
    if json_out:
        emit_json(rec.to_json())
        return
    out.print(
        f"{rec.source}: recovered {len(report.steps)} payload(s) in backfill run "
        f"{report.run_id} ({report.changes:,} changes; {rec.archived_now} newly archived; "
        f"{report.gaps_recorded} gap(s) recorded)\n  {report.summary}"
    )


def ingest_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="Source name."),
    file: Path = typer.Argument(..., help="Payload file."),
    published_at: str | None = typer.Option(
        None,
        "--published-at",
        help="Publisher date: YYYY-MM-DD (00:00 in the source's timezone) or an ISO "
        "timestamp. Default: the date in the file name (if the source says so).",
    ),
    allow_mass_delete: bool = MASS_OPT,
    allow_future: bool = FUTURE_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Archive FILE and apply it as a live run (one transaction with its changes,
    outbox rows and the watermark advance)."""
    with ledger(ctx) as led:
        result = led.source(source, require_declared=False).ingest(
            file,
            published_at=published_at,
            allow_mass_delete=allow_mass_delete,
            allow_future=allow_future,
        )
    _render_ingest(result, json_out)


def run_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="Source name (must have --fetch)."),
    allow_mass_delete: bool = MASS_OPT,
    no_recover: bool = typer.Option(
        False,
        "--no-recover",
        help="Refuse (naming them) when several publications are waiting, instead of "
        "applying them all oldest first as one backfill run.",
    ),
    allow_future: bool = FUTURE_OPT,
    accept_restored: bool = typer.Option(
        False,
        "--accept-restored",
        help="The publisher's date went back before the watermark with other content "
        "(a layer restored from a backup): apply it as a correction dated now.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Fetch from the source's location and ingest. One publication waiting: a live
    run of the newest. Several waiting (dated files after the watermark, or days the
    cadence expected): every one the source still serves is archived and applied
    oldest first as ONE backfill run, with gaps for the rest (as the scheduler does)."""
    from feedledger.api.results import (  # lazy: --help loads no API
        NothingToDo,
        NotModified,
        Recovered,
    )

    with ledger(ctx) as led:
        result = led.source(source).run(
            allow_mass_delete=allow_mass_delete,
            recover=not no_recover,
            allow_future=allow_future,
            accept_restored=accept_restored,
        )
    if isinstance(result, NotModified):
        if json_out:
            emit_json(result.to_json())
        else:
            out.print(f"{source}: the publisher has nothing new (not modified).")
        return
    if isinstance(result, NothingToDo):
        if json_out:
            emit_json(result.to_json())
        else:
            out.print(f"{source}: nothing to do: {result.reason}")
        return
    if isinstance(result, Recovered):
        _render_recovery(result, json_out)
        return
    _render_ingest(result, json_out)


def runs_cmd(
    ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
) -> None:
    """Runs of a source, oldest first.

    A run whose writes were all retracted shows as retracted (when, by which run)."""
    with ledger(ctx) as led:
        items = led.source(source).runs()
    if json_out:
        emit_json([r.to_json() for r in items])
        return
    table(
        f"runs of {source}",
        ["run_id", "kind", "status", "started_at", "finished_at", "payloads", "changes", "error"],
        [
            [
                r.run_id,
                r.kind.value,
                _run_status(r),
                when(r.started_at),
                when(r.finished_at),
                r.payloads,
                r.changes,
                r.error,
            ]
            for r in items
        ],
    )


def _run_status(r: Run) -> str:
    """A run's status for the table: how it ended, and whether what it wrote still
    stands (`retracted <when> by <run>`, `partly retracted by <run>`)."""
    text = r.status.value if r.status != "held" else "held: needs review (`review RUN_ID`)"
    if r.resumed:
        text += f" (resumed after {len(r.resumed)} interruption(s))"
    by = ", ".join(x[:8] for x in r.retracted_by)
    if r.retracted_at is not None:
        text = f"retracted {when(r.retracted_at)}" + (f" by {by}" if by else "") + f" ({text})"
    elif r.retracted_by:
        text += f"; partly retracted by {by}"
    return text


def changes_cmd(
    ctx: typer.Context,
    run: str = typer.Option(
        ..., "--run", help="Run id, or any unique prefix of it (as tables show it)."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """What one run changed: added / changed / deleted, before and after; then the
    records it held (`unresolved`) or refused as older (`superseded`)."""
    with ledger(ctx) as led:
        run = led.resolve_run(run)
        found = led.changes(run)
    if json_out:
        emit_json([c.to_json() for c in found])
        return
    # keys and records as stored (canonical JSON text), times compact
    items = [(c, c.to_json()) for c in found if c.change is not None]
    held = [(c, c.to_json()) for c in found if c.change is None]
    geo = any(c.geometry_changed is not None for c, _j in items)  # a GIS source
    table(
        f"changes of run {run}",
        ["key", "change", "valid_from", "before", "after"] + (["geometry"] if geo else []),
        [
            [j["key"], j["change"], when(c.valid_from), j["before"], j["after"]]
            + (["changed" if c.geometry_changed else "same"] if geo else [])
            for c, j in items
        ],
        fold=True,
    )
    if held:
        table(
            f"records of run {run} not applied (unresolved: held for a decision; "
            "superseded: older than the revision held)",
            ["key", "outcome", "valid_from", "revision", "current_revision", "record"],
            [
                [
                    j["key"],
                    j["outcome"],
                    when(o.valid_from),
                    o.revision,
                    o.current_revision,
                    j["after"],
                ]
                for o, j in held
            ],
            fold=True,
        )


def watermark_cmd(
    ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
) -> None:
    """The last applied payload of a source (publisher date and payload id)."""
    with ledger(ctx) as led:
        data: dict[str, Any] = led.source(source).watermark().to_json()
    if json_out:
        emit_json(data)
    else:
        out.print(
            f"{source}: {data['published_at'] or 'nothing applied yet'}"
            + (f" (payload {data['payload_id']})" if data["payload_id"] else "")
        )


def snapshot_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    valid: str = typer.Option(..., "--valid", help="Valid time of the snapshot."),
    known_at: str | None = typer.Option(None, "--known-at"),
    fmt: str = typer.Option(
        "csv",
        "--format",
        help="csv | jsonl | parquet, or for a GIS source geojson | geoparquet | gpkg "
        "(parquet, geoparquet and gpkg need -o FILE).",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write this file instead of stdout (-: stdout)."
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Refuse (exit 2, nothing written) when --valid falls in a gap, a stretch "
        "the source was not observed, instead of warning.",
    ),
) -> None:
    """Write the whole source as it stood at --valid (streaming); columns in the
    source's field order (CSV and the GIS formats). Inside a gap it warns on stderr
    (`--strict`: refuses)."""
    from feedledger.api.errors import GapWarning  # lazy: --help loads no API
    from feedledger.api.source import Source  # lazy: --help loads no API

    if output is not None and str(output) == "-":
        output = None  # the usual spelling of stdout, never a file named "-"
    Source.check_export(fmt, output)
    with ledger(ctx) as led:
        src = led.source(source)
        tz = src.config.timezone
        valid_at = instant(valid, tz, "--valid")
        known = opt_instant(known_at, tz, "--known-at")
        inside = src.snapshot_gap(valid=valid_at, known_at=known)
        if inside is not None:
            _gap_notice(source, valid, inside, strict)
        with warnings.catch_warnings():  # said above, once, in the CLI's words
            warnings.simplefilter("ignore", GapWarning)
            n = src.export_snapshot(output, valid=valid_at, known_at=known, format=fmt)
    if output:
        err.print(f"wrote {n:,} entities to {output}")
    elif n == 0:  # an empty stdout alone says nothing of why
        known_note = f" as known at {known_at}" if known_at else ""
        err.print(f"{source}: no entity at --valid {valid}{known_note}; nothing written")


def verify_cmd(
    ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
) -> None:
    """Prove the diff state (local cache and store read) equals the state
    recomputed from history. Exit 1 if not."""
    with ledger(ctx) as led:
        report = led.source(source).verify()
    if json_out:
        emit_json(report.to_json())
    else:
        for chk in report.checks:
            out.print(
                f"{chk.name}: {'ok' if chk.ok else 'MISMATCH'} "
                f"({chk.rows:,} rows; missing {len(chk.missing)}, extra "
                f"{len(chk.extra)}, different {len(chk.different)})"
            )
    if not report.ok:
        raise typer.Exit(1)


def _gap_notice(source: str, valid: str, inside: SnapshotGap, strict: bool) -> None:
    """`snapshot --valid D` inside a standing gap: say so (or refuse with --strict)."""
    from feedledger.api.errors import InGap, gap_text  # lazy: --help loads no API

    text = gap_text(source, valid, inside)
    if strict:
        raise InGap(
            text + "; nothing written", inside, source=source, hint="drop --strict to export anyway"
        )
    err.print(
        f"[yellow]warning:[/] {escape(text)}; the table shows the state as last observed",
        markup=True,
    )
