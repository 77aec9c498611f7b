"""`feedledger archive add|list|reindex|compact|verify` over the public API (its archive
and pipeline modules are imported by each call)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path

import typer

from feedledger.cli.common import (
    JSON_OPT,
    emit_json,
    err,
    instant,
    ledger,
    opt_instant,
    out,
    table,
    when,
)
from feedledger.model.cadence import day_start_us
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import to_us, zone


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
    results = []
    with ledger(ctx) as led:
        src = led.source(source)
        batch = src.payload_files(list(files), published_at=published_at)
        for path in batch.skipped:
            err.print(f"skipped (no date in its name): {path}")
        for file in batch.files:
            payload = src.archive_add(file, published_at=published_at, allow_future=allow_future)
            results.append(payload.to_json())
            if not json_out:
                verb = "archived" if payload.created else "already archived (no-op)"
                out.print(
                    f"{source}: {verb} {payload.payload_id} sha256 {payload.sha256[:12]}… "
                    f"published {payload.published_at.isoformat()}"
                )
    if json_out:
        single = len(files) == 1 and not files[0].is_dir()
        emit_json(results[0] if single else results)


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
    if rejected:
        if start is not None or end is not None:
            raise ConfigError("--from/--to do not apply to --rejected", source=source)
        _list_rejected(ctx, source, json_out)
        return
    with ledger(ctx) as led:
        src = led.source(source)
        tz = src.config.timezone
        lo = opt_instant(start, tz, "--from")
        hi = _end(end, tz)
        if lo is not None and hi is not None and _last_us(hi, tz) < to_us(lo):
            raise ConfigError(f"--from {start} is after --to {end}", source=source)
        refs = src.archive_list(start=lo, end=hi)
    if json_out:
        emit_json([r.to_json() for r in refs])
        return
    table(
        f"archive of {source}",
        ["published_at", "payload_id", "size", "original_name", "fetched_at"],
        [
            [when(r.published_at), r.payload_id, f"{r.size:,}", r.original_name, when(r.fetched_at)]
            for r in refs
        ],
    )


def _end(text: str | None, tz: str) -> date | datetime | None:
    """`--to`: a bare date includes its whole day; a timestamp is that instant."""
    if text is None:
        return None
    value = instant(text, tz, "--to")
    return value.astimezone(zone(tz)).date() if len(text.strip()) == 10 else value


def _last_us(end: date | datetime, tz: str) -> int:
    """The last microsecond `end` includes (a date: the end of its day in `tz`)."""
    if isinstance(end, datetime):
        return to_us(end)
    return day_start_us(end + timedelta(days=1), tz) - 1


def _list_rejected(ctx: typer.Context, source: str, json_out: bool) -> None:
    """Refused payloads, read from the archive alone (the source need not be declared:
    bytes sent under a mistyped name are listed under that name)."""
    with ledger(ctx) as led:  # the archive only: the store is not opened
        items = led.source(source, require_declared=False).rejected_payloads()
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


def reindex_cmd(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Rebuild the payload index in the store from the archive alone (folder or bucket)."""
    with ledger(ctx) as led:
        result = led.reindex_archive()
    if json_out:
        emit_json(result.to_json())
    else:
        out.print(
            f"scanned {result.scanned} sidecars: {result.added} added, "
            f"{result.present} already indexed, {len(result.ambiguous)} ambiguous"
        )


@contextmanager
def _bar(label: str, quiet: bool) -> Iterator[Callable[[int, int, str | None], None]]:
    """A per-payload progress bar on stderr (nothing when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # lazy: bars only

    if quiet or not err.is_terminal:
        yield lambda _done, _total, _payload: None
        return
    with Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task("", total=None)
        yield lambda done, total, _payload: bar.update(task, completed=done, total=total)


def _mib(n: int) -> str:
    return f"{n / 1048576:,.1f} MiB"


def compact_cmd(
    ctx: typer.Context,
    source: str | None = typer.Argument(None, help="Only this source's payloads."),
    json_out: bool = JSON_OPT,
) -> None:
    """Compress raw archived payloads in place (zstd, each against its source's previous
    payload, a standalone keyframe every [archive] full_frame_every), crash-safe: the
    compressed object is durable and checked before the raw one is deleted; a rerun
    finishes an interrupted one. Exit 1 if a payload could not be read."""
    with ledger(ctx) as led, _bar("compacting", json_out) as step:
        result = led.compact_archive(source, step)
    if json_out:
        emit_json(result.to_json())
    else:
        for item in result.items:
            if item["status"] == "bad":
                err.print(f"[red]unreadable:[/] {item['payload_id']}: {item['error']}", markup=True)
        ratio = result.stored_after / result.raw_bytes if result.raw_bytes else 1.0
        out.print(
            f"{result.payloads} payloads: {result.compacted} compressed now, {result.already} "
            f"already, {result.kept_raw} kept raw, {result.shared} shared, {result.bad} "
            f"unreadable; {_mib(result.stored_before)} -> {_mib(result.stored_after)} "
            f"({ratio:.1%} of {_mib(result.raw_bytes)} raw)"
        )
    if result.bad:
        raise typer.Exit(1)


def verify_cmd(
    ctx: typer.Context,
    source: str | None = typer.Argument(None, help="Only this source's payloads."),
    json_out: bool = JSON_OPT,
) -> None:
    """Read back every archived payload (decompressing its chain) and check its sha256,
    one line per payload. Exit 1 if any is missing or damaged."""
    with ledger(ctx) as led, _bar("verifying", json_out) as step:
        result = led.verify_archive(source, step)
    if json_out:
        emit_json(result.to_json())
    else:
        table(
            "archive verify" + (f" of {source}" if source else ""),
            ["source", "payload_id", "published_at", "stored", "size", "result"],
            [
                [
                    i["source"],
                    i["payload_id"],
                    i["published_at"],
                    i["encoding"] or "missing",
                    f"{i['stored_size'] or 0:,} / {i['size']:,}",
                    "ok" if i["ok"] else i["error"],
                ]
                for i in result.items
            ],
        )
        out.print(f"{result.ok} of {result.payloads} payloads ok, {result.bad} bad")
    if result.bad:
        raise typer.Exit(1)
