"""Ledger commands: ingest, run, runs, changes, watermark, snapshot, verify (history and
asof are in entity_cmds.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from feedledger.cli.common import (
    JSON_OPT,
    context,
    emit_json,
    err,
    guarded,
    guess_type,
    out,
    read_payload_file,
    table,
    when,
)
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import iso

if TYPE_CHECKING:
    from feedledger.pipeline.ingest import IngestResult
    from feedledger.pipeline.recovery import Recovery

# Pipeline and ledger modules (Polars, SQLAlchemy) are imported inside the commands, so
# `--help` is quick and `ingest` can import the store's driver while it parses.

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


def _render_ingest(result: IngestResult, json_out: bool) -> None:
    if json_out:
        emit_json(result)
        return
    if result.status == "already_applied":
        out.print(
            f"{result.source}: payload {result.payload.payload_id} "
            f"(published {iso(result.payload.published_at)}) was already applied by run "
            f"{result.applied_by}; nothing changed."
        )
        return
    c = result.counts
    out.print(
        f"{result.source}: applied payload {result.payload.payload_id} published "
        f"{iso(result.payload.published_at)} in run {result.run_id}\n"
        f"  added {c.get('added', 0):,}  changed {c.get('changed', 0):,}  "
        f"deleted {c.get('deleted', 0):,}  unchanged {c.get('unchanged', 0):,}"
        + (f"  superseded {c['superseded']:,}" if c.get("superseded") else "")
        + (
            f"  unresolved {c['unresolved']:,} (held, see `feedledger changes --run`)"
            if c.get("unresolved")
            else ""
        )
    )


def _render_recovery(rec: Recovery, json_out: bool) -> None:
    report = rec.report
    assert report is not None
    span = (
        f"{iso(report.steps[0].published_at)} .. {iso(report.steps[-1].published_at)}"
        if report.steps
        else "none"
    )
    err.print(
        f"[yellow]note:[/] {rec.source}: several publications were waiting ({len(rec.days)} "
        f"publication day(s) since {rec.days[0]}); applying only the newest would lose the "
        "states in between, so every one the source still serves was applied oldest first "
        f"as one backfill run ({len(report.steps)} payload(s): {span}; "
        f"{len(report.missing_dates)} day(s) recorded as gaps)",
        markup=True,
    )
    if json_out:
        emit_json(
            {
                "source": rec.source,
                "status": "recovered",
                "run_id": report.run_id,
                "kind": report.kind,
                "changes": report.changes,
                "payloads": len(report.steps),
                "missed_dates": [d.isoformat() for d in rec.days],
                "archived_now": len(rec.archived),
                "gaps_recorded": report.gaps_recorded,
                "backfill": report.to_json(),
            }
        )
        return
    out.print(
        f"{rec.source}: recovered {len(report.steps)} payload(s) in backfill run "
        f"{report.run_id} ({report.changes:,} changes; {len(rec.archived)} newly archived; "
        f"{report.gaps_recorded} gap(s) recorded)\n  {report.summary}"
    )


def register(app: typer.Typer) -> None:
    @app.command("ingest")
    @guarded
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
        from feedledger.pipeline.ingest import ingest

        with context(ctx) as c:
            # passed without a name here, so that ingest can free the bytes once they
            # are archived and parsed (a large payload's copy is not held to the end)
            result = ingest(
                c,
                source,
                read_payload_file(file),
                published_at=published_at,
                original_name=file.name,
                content_type=guess_type(file),
                allow_mass_delete=allow_mass_delete,
                allow_future=allow_future,
            )
        _render_ingest(result, json_out)

    @app.command("run")
    @guarded
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
        json_out: bool = JSON_OPT,
    ) -> None:
        """Fetch from the source's location and ingest. One publication waiting: a live
        run of the newest. Several waiting (dated files after the watermark, or days the
        cadence expected): every one the source still serves is archived and applied
        oldest first as ONE backfill run, with gaps for the rest (as the scheduler does)."""
        from feedledger.pipeline.recovery import Recovery
        from feedledger.pipeline.run import NothingNew, run_source

        with context(ctx) as c:
            result = run_source(
                c, source, allow_mass_delete=allow_mass_delete, recover=not no_recover
            )
        if result is None:
            if json_out:
                emit_json({"source": source, "status": "not_modified"})
            else:
                out.print(f"{source}: the publisher has nothing new (not modified).")
            return
        if isinstance(result, NothingNew):
            if json_out:
                emit_json(result)
            else:
                out.print(f"{source}: nothing to do: {result.reason}")
            return
        if isinstance(result, Recovery):
            _render_recovery(result, json_out)
            return
        _render_ingest(result, json_out)

    @app.command("runs")
    @guarded
    def runs_cmd(
        ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
    ) -> None:
        """Runs of a source, oldest first."""
        from feedledger.ledger.runs import list_runs

        with context(ctx) as c:
            c.workspace.source(source)
            items = list_runs(c.store, source)
        if json_out:
            emit_json(items)
            return
        table(
            f"runs of {source}",
            [
                "run_id",
                "kind",
                "status",
                "started_at",
                "finished_at",
                "payloads",
                "changes",
                "error",
            ],
            [
                [
                    r.run_id,
                    r.kind,
                    (r.status if r.status != "held" else "held: needs review (`review RUN_ID`)")
                    + (
                        f" (resumed after {len(r.resumed)} interruption(s))"
                        if r.resumptions
                        else ""
                    ),
                    when(r.started_at),
                    when(r.finished_at),
                    r.payloads,
                    r.changes,
                    r.error,
                ]
                for r in items
            ],
        )

    @app.command("changes")
    @guarded
    def changes_cmd(
        ctx: typer.Context,
        run: str = typer.Option(
            ..., "--run", help="Run id, or any unique prefix of it (as tables show it)."
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """What one run changed: added / changed / deleted, before and after; then the
        records it held (`unresolved`) or refused as older (`superseded`)."""
        from feedledger.ledger import queries, run_ids

        with context(ctx) as c:
            run = run_ids.resolve(c.store, run)
            items = queries.changes(c.store, run)
            held = queries.run_outcomes(c.store, run)
        if json_out:
            emit_json([*items, *held])
            return
        table(
            f"changes of run {run}",
            ["key", "change", "valid_from", "before", "after"],
            [[ch.key, ch.change, when(ch.valid_from), ch.before, ch.after] for ch in items],
            fold=True,
        )
        if held:
            table(
                f"records of run {run} not applied (unresolved: held for a decision; "
                "superseded: older than the revision held)",
                ["key", "outcome", "valid_from", "revision", "current_revision", "record"],
                [
                    [
                        o.key,
                        o.outcome,
                        when(o.valid_from),
                        o.revision,
                        o.current_revision,
                        o.attributes,
                    ]
                    for o in held
                ],
                fold=True,
            )

    @app.command("watermark")
    @guarded
    def watermark_cmd(
        ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
    ) -> None:
        """The last applied payload of a source (publisher date and payload id)."""
        with context(ctx) as c:
            c.workspace.source(source)
            wm = c.store.watermark(source)
        data: dict[str, Any] = (
            wm.to_json() if wm else {"source": source, "published_at": None, "payload_id": None}
        )
        if json_out:
            emit_json(data)
        else:
            out.print(
                f"{source}: {data['published_at'] or 'nothing applied yet'}"
                + (f" (payload {data['payload_id']})" if data["payload_id"] else "")
            )

    @app.command("snapshot")
    @guarded
    def snapshot_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        valid: str = typer.Option(..., "--valid", help="Valid time of the snapshot."),
        known_at: str | None = typer.Option(None, "--known-at"),
        fmt: str = typer.Option("csv", "--format", help="csv | jsonl"),
        output: Path | None = typer.Option(
            None, "--output", "-o", help="Write this file instead of stdout."
        ),
        strict: bool = typer.Option(
            False,
            "--strict",
            help="Refuse (exit 2, nothing written) when --valid falls in a gap, a stretch "
            "the source was not observed, instead of warning.",
        ),
    ) -> None:
        """Write the whole source as it stood at --valid (streaming); CSV columns in the
        source's field order. Inside a gap it warns on stderr (`--strict`: refuses)."""
        from feedledger.pipeline import query, snapshot_export

        if fmt not in ("csv", "jsonl"):
            raise ConfigError(f"--format must be csv or jsonl, not {fmt!r}")
        if output is not None:
            snapshot_export.check_output(output)
        with context(ctx) as c:
            inside = query.snapshot_gap(c, source, valid=valid, known_at=known_at)
            if inside is not None:
                _gap_notice(source, valid, inside, strict)
            order = (
                snapshot_export.field_order(c, source, valid=valid, known_at=known_at)
                if fmt == "csv"
                else []
            )
            rows = query.snapshot_rows(c, source, valid=valid, known_at=known_at)
            n = snapshot_export.write(rows, fmt, output, order)
        if output:
            err.print(f"wrote {n:,} entities to {output}")

    @app.command("verify")
    @guarded
    def verify_cmd(
        ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
    ) -> None:
        """Prove the diff state (local cache and store read) equals the state
        recomputed from history. Exit 1 if not."""
        from feedledger.pipeline.verify import verify

        with context(ctx) as c:
            report = verify(c, source)
        if json_out:
            emit_json(report)
        else:
            for chk in report["checks"]:
                out.print(
                    f"{chk['name']}: {'ok' if chk['ok'] else 'MISMATCH'} "
                    f"({chk['rows']:,} rows; missing {len(chk['missing'])}, extra "
                    f"{len(chk['extra'])}, different {len(chk['different'])})"
                )
        if not report["ok"]:
            raise typer.Exit(1)


def _gap_notice(source: str, valid: str, inside: dict[str, Any], strict: bool) -> None:
    """`snapshot --valid D` inside a standing gap: say so (or refuse with --strict)."""
    gap = inside["gap"]
    text = (
        f"{valid} is inside a gap {iso(gap.start_at)} .. {iso(gap.end_at)} ({gap.reason}): "
        f"{source} was not observed then; last observed "
        f"{inside['last_observed_at'] or 'never'}, next observed "
        f"{inside['next_observed_at'] or 'not yet'}"
    )
    if strict:
        raise ConfigError(
            text + "; nothing written", source=source, hint="drop --strict to export anyway"
        )
    err.print(
        f"[yellow]warning:[/] {escape(text)}; the table shows the state as last observed",
        markup=True,
    )
