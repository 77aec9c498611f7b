"""`feedledger export delta|status`: the bitemporal history as a Delta Lake table, over
the public API (`Ledger.export_delta`; the `delta` extra is imported by the call)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from feedledger.cli.common import JSON_OPT, emit_json, err, ledger, out, table, when


def delta_cmd(
    ctx: typer.Context,
    sources: list[str] = typer.Argument(..., help="The sources to export (one table)."),
    to: str = typer.Option(
        ...,
        "--to",
        help="The Delta table: a local folder, or s3://BUCKET/PREFIX on the archive's object "
        "store (its endpoint; credentials from the AWS environment).",
    ),
    follow: bool | None = typer.Option(
        None,
        "--follow/--no-follow",
        help="Also export after every run the scheduler applies to these sources "
        "(--no-follow: stop). Kept in the store.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Write the SOURCES' history -- every version, retracted ones too -- to a Delta Lake
    table partitioned by source and valid year: key, the attributes as typed columns
    (the source's field order; geometry as WKB), valid_from, valid_to, recorded_at,
    retracted_at, run_id, payload_id, deleted. Run it again to add what was recorded
    or retracted since: ONE Delta commit per call (a merge that also closes the earlier
    versions' valid_to), so the table's versions follow feedledger's transaction time
    (time travel to version N = `asof --known-at` of that commit). Safe to kill and
    rerun: the table itself records how far it holds each source.

    Read it with polars (`pl.read_delta(URI)`), DuckDB (`delta_scan`), Spark or Trino."""
    with ledger(ctx) as led, _bar(json_out) as step:
        result = led.export_delta(sources, to, progress=step, follow=follow)
    data = result.to_json()
    if json_out:
        emit_json(data)
        return
    verb = f"committed version {data['delta_version']}" if data["committed"] else "up to date"
    out.print(f"{data['target']}: {verb}, {data['rows']} rows written")
    table(
        "",
        ["source", "since", "known at", "inserted", "updated"],
        [
            [
                s["source"],
                s["since"] or "-",
                s["known_at"] or "nothing recorded",
                s["inserted"],
                s["updated"],
            ]
            for s in data["sources"]
        ],
    )


def status_cmd(
    ctx: typer.Context,
    to: str | None = typer.Option(None, "--to", help="Only this Delta table."),
    json_out: bool = JSON_OPT,
) -> None:
    """How far each Delta table holds each source (the store's record of the exports),
    and whether the scheduler follows the source's runs with an export."""
    with ledger(ctx) as led:
        found = led.delta_exports(to)
    if json_out:
        emit_json([p.to_json() for p in found])
        return
    if not found:
        out.print("no Delta exports yet (feedledger export delta SOURCE --to URI)")
        return
    table(
        "Delta exports",
        ["table", "source", "known at", "version", "exported", "follow"],
        [
            [p.target, p.source, when(p.known_at), p.delta_version, when(p.exported_at), p.follow]
            for p in found
        ],
        fold=True,
    )


@contextmanager
def _bar(quiet: bool) -> Iterator[Callable[[str, str, int, int], None]]:
    """Versions read and the commit, on stderr (nothing when it is not a terminal)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn  # lazy: bars only

    if quiet or not err.is_terminal:
        yield lambda _source, _stage, _done, _total: None
        return
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=err, transient=True
    ) as bar:
        task = bar.add_task("reading", total=None)

        def step(source: str, stage: str, done: int, _total: int) -> None:
            if stage == "commit":
                text = "committing" if done == 0 else "committed"
            else:
                text = f"{source}: {done:,} versions {'read' if stage == 'read' else 'to write'}"
            bar.update(task, description=text)

        yield step
