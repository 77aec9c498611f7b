"""Ledger commands: ingest, run, runs, changes, watermark, snapshot, verify (history and
asof are in entity_cmds.py)."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

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
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.timeutil import iso

if TYPE_CHECKING:
    from feedledger.pipeline.ingest import IngestResult

# Pipeline and ledger modules (Polars, SQLAlchemy) are imported inside the commands, so
# `--help` is quick and `ingest` can import the store's driver while it parses.

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
            )
        _render_ingest(result, json_out)

    @app.command("run")
    @guarded
    def run_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(..., help="Source name (must have --fetch)."),
        allow_mass_delete: bool = MASS_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """Fetch the newest payload from the source's location and ingest it."""
        from feedledger.pipeline.run import run_source

        with context(ctx) as c:
            result = run_source(c, source, allow_mass_delete=allow_mass_delete)
        if result is None:
            if json_out:
                emit_json({"source": source, "status": "not_modified"})
            else:
                out.print(f"{source}: the publisher has nothing new (not modified).")
            return
        _render_ingest(result, json_out)

    @app.command("runs")
    @guarded
    def runs_cmd(
        ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
    ) -> None:
        """Runs of a source, oldest first."""
        from feedledger.ledger import queries

        with context(ctx) as c:
            c.workspace.source(source)
            items = queries.list_runs(c.store, source)
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
                    r.status if r.status != "held" else "held: needs review (`review RUN_ID`)",
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
        run: str = typer.Option(..., "--run", help="Run id."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """What one run changed: added / changed / deleted, before and after."""
        from feedledger.ledger import queries

        with context(ctx) as c:
            if not queries.run_exists(c.store, run):
                raise NotFoundError(
                    f"unknown run id {run!r}", hint="list runs with `feedledger runs SOURCE`"
                )
            items = queries.changes(c.store, run)
        if json_out:
            emit_json(items)
            return
        table(
            f"changes of run {run}",
            ["key", "change", "valid_from", "before", "after"],
            [[ch.key, ch.change, when(ch.valid_from), ch.before, ch.after] for ch in items],
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
            None, "--output", "-o", help="Write here instead of stdout."
        ),
    ) -> None:
        """Write the whole source as it stood at --valid (streaming)."""
        from feedledger.pipeline import query

        if fmt not in ("csv", "jsonl"):
            raise ConfigError(f"--format must be csv or jsonl, not {fmt!r}")
        with context(ctx) as c:
            rows = query.snapshot_rows(c, source, valid=valid, known_at=known_at)
            handle = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
            try:
                n = _write_snapshot(rows, fmt, handle)
            finally:
                if output:
                    handle.close()
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


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=False)


def _write_snapshot(rows: Any, fmt: str, handle: Any) -> int:
    from feedledger.formats.canonical import RawNumber

    n = 0
    if fmt == "jsonl":
        for _key, attrs in rows:
            handle.write(attrs + "\n")
            n += 1
        return n
    writer: Any = None
    columns: list[str] = []
    buf = io.StringIO()
    for _key, attrs in rows:
        record = json.loads(attrs, parse_float=RawNumber, parse_int=RawNumber)
        if writer is None:
            columns = list(record)
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerow(columns)
        elif list(record) != columns and set(record) - set(columns):
            raise ConfigError("entities have different fields; use --format jsonl")
        writer.writerow([_cell(record.get(col)) for col in columns])
        n += 1
        if buf.tell() > 1 << 20:
            handle.write(buf.getvalue())
            buf.seek(0)
            buf.truncate()
    handle.write(buf.getvalue())
    return n
