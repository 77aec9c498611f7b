"""`feedledger archive add|list|reindex` (pipeline modules are imported by each command)."""

from __future__ import annotations

from pathlib import Path

import typer

from feedledger.cli.common import (
    JSON_OPT,
    context,
    emit_json,
    guarded,
    guess_type,
    out,
    read_payload_file,
    table,
    when,
)
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import iso

app = typer.Typer(help="The content-addressed payload archive.", no_args_is_help=True)


@app.command("add")
@guarded
def add(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    file: Path = typer.Argument(...),
    published_at: str | None = typer.Option(
        None, "--published-at", help="Publisher date (YYYY-MM-DD or ISO timestamp)."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Archive FILE (write-once, sha256-addressed, fsynced, with a sidecar) without
    applying it. Archiving identical bytes twice is a no-op."""
    from feedledger.pipeline.archiving import archive_add

    data = read_payload_file(file)
    with context(ctx) as c:
        ref, created = archive_add(
            c,
            source,
            data,
            published_at=published_at,
            original_name=file.name,
            content_type=guess_type(file),
        )
    if json_out:
        emit_json({**ref.to_json(), "created": created})
    else:
        verb = "archived" if created else "already archived (no-op)"
        out.print(
            f"{source}: {verb} {ref.payload_id} sha256 {ref.sha256[:12]}… "
            f"published {iso(ref.published_at)}"
        )


@app.command("list")
@guarded
def list_(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    start: str | None = typer.Option(None, "--from", help="From this publisher date."),
    end: str | None = typer.Option(None, "--to", help="Up to this publisher date."),
    json_out: bool = JSON_OPT,
) -> None:
    """Archived payloads of a source in publisher order."""
    from feedledger.pipeline import query

    with context(ctx) as c:
        src = c.workspace.source(source)
        lo = query.instant(src, start, "--from")
        if lo is not None and end is not None:
            hi_check = query.instant_end(src, end, "--to")
            if hi_check is not None and hi_check < lo:
                raise ConfigError(f"--from {start} is after --to {end}", source=source)
        hi = query.instant_end(src, end, "--to")
        refs = c.store.list_payloads(source, lo, hi)
    if json_out:
        emit_json(refs)
        return
    table(
        f"archive of {source}",
        ["published_at", "payload_id", "size", "original_name", "fetched_at"],
        [
            [when(r.published_at), r.payload_id, f"{r.size:,}", r.original_name, when(r.fetched_at)]
            for r in refs
        ],
    )


@app.command("reindex")
@guarded
def reindex_cmd(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Rebuild the payload index in the store from the archive alone (folder or bucket)."""
    from feedledger.pipeline.archiving import reindex

    with context(ctx) as c:
        result = reindex(c)
    if json_out:
        emit_json(result)
    else:
        out.print(
            f"scanned {result.scanned} sidecars: {result.added} added, "
            f"{result.present} already indexed, {len(result.ambiguous)} ambiguous"
        )
