"""`feedledger archive add|list|reindex` (pipeline modules are imported by each command)."""

from __future__ import annotations

from pathlib import Path

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
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import iso

app = typer.Typer(help="The content-addressed payload archive.", no_args_is_help=True)


@app.command("add")
@guarded
def add(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    files: list[Path] = typer.Argument(..., help="Payload files, or folders of them."),
    published_at: str | None = typer.Option(
        None,
        "--published-at",
        help="Publisher date (YYYY-MM-DD or ISO timestamp) of the ONE file given. Default: "
        "each file's date from its name (the source's published_from).",
    ),
    allow_future: bool = typer.Option(
        False,
        "--allow-future",
        help="Accept a publisher date more than a day after now (refused by default).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Archive FILEs (write-once, sha256-addressed, fsynced, with a sidecar) without
    applying them; a folder adds its dated payload files. Archiving identical bytes twice
    is a no-op. JSON: one object for one FILE, else a list of them."""
    from feedledger.pipeline.archiving import archive_add, expand_files

    results = []
    with context(ctx) as c:
        batch = expand_files(c, source, files, published_at=published_at)
        for path in batch.skipped:
            err.print(f"skipped (no date in its name): {path}")
        for file in batch.files:
            ref, created = archive_add(
                c,
                source,
                read_payload_file(file),
                published_at=published_at,
                original_name=file.name,
                content_type=guess_type(file),
                allow_future=allow_future,
            )
            results.append({**ref.to_json(), "created": created})
            if not json_out:
                verb = "archived" if created else "already archived (no-op)"
                out.print(
                    f"{source}: {verb} {ref.payload_id} sha256 {ref.sha256[:12]}… "
                    f"published {iso(ref.published_at)}"
                )
    if json_out:
        single = len(files) == 1 and not files[0].is_dir()
        emit_json(results[0] if single else results)


@app.command("list")
@guarded
def list_(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    start: str | None = typer.Option(None, "--from", help="From this publisher date."),
    end: str | None = typer.Option(None, "--to", help="Up to this publisher date."),
    rejected: bool = typer.Option(
        False,
        "--rejected",
        help="List the source's refused payloads instead (unreadable, undated or ambiguous "
        "bytes kept for inspection), with the reason and where the bytes are.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Archived payloads of a source in publisher order (--rejected: refused ones)."""
    from feedledger.pipeline import query

    if rejected:
        if start is not None or end is not None:
            raise ConfigError("--from/--to do not apply to --rejected", source=source)
        _list_rejected(ctx, source, json_out)
        return
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


def _list_rejected(ctx: typer.Context, source: str, json_out: bool) -> None:
    """Refused payloads, read from the archive alone (the source need not be declared:
    bytes sent under a mistyped name are listed under that name)."""
    with context(ctx) as c:  # the archive only: the store is not opened
        items = c.archive.rejected(source)
    if json_out:
        emit_json([item.to_json() for item in items])
        return
    table(
        f"refused payloads of {source}",
        ["rejected_at", "kind", "original_name", "size", "reason", "bytes at"],
        [
            [when(i.rejected_at), i.kind, i.original_name, f"{i.size:,}", i.reason, i.location]
            for i in items
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
