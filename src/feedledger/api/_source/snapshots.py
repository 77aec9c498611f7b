"""A source's snapshot as `Source` answers it: the export's refusals, the store's Arrow
batches cut to a size, the rows as one polars DataFrame, and the standing gap a valid
time falls in (warned about, or refused with `strict`)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.api.errors import GapWarning, InGap, gap_text
from feedledger.api.results import Gap, SnapshotGap
from feedledger.api.times import opt_dt
from feedledger.context import Context
from feedledger.model.timeutil import iso

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa


def check_export(
    format: str, output: str | os.PathLike[str] | None, *, geo: bool | None = None
) -> None:
    """`Source.check_export`: a format other than csv, jsonl, geojson, geoparquet or gpkg;
    a GIS format of a source without geometry (`geo` False; None: not known yet);
    geoparquet or gpkg to stdout (`output` None); an output path that cannot be a file."""
    from feedledger.pipeline.exports import snapshot as snapshot_export  # lazy: SQLAlchemy, Arrow

    path = Path(output) if output is not None else None
    snapshot_export.check_format(format, path, geo=geo)
    if path is not None:
        snapshot_export.check_output(path)


def _joined(held: list[pa.RecordBatch]) -> pa.RecordBatch:
    import pyarrow as pa  # lazy: keeps `import feedledger.api.source` from loading Arrow

    if len(held) == 1:
        return held[0]
    return pa.Table.from_batches(held).combine_chunks().to_batches()[0]


def cut_batches(
    ctx: Context, source: str, valid_us: int, known_us: int | None, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The store's batches (`ledger.snapshot_rows.batches`, the one fast path every
    snapshot reads through) cut into batches of exactly `batch_rows` (the last
    fewer)."""
    from feedledger.pipeline.exports import snapshot as snapshot_export  # lazy: SQLAlchemy, Arrow

    found = snapshot_export.batches(ctx, source, valid_us, known_us)
    held: list[pa.RecordBatch] = []
    size = 0
    for got in found:
        held.append(got)
        size += got.num_rows
        while size >= batch_rows:
            whole = _joined(held)
            yield whole.slice(0, batch_rows)
            rest = whole.slice(batch_rows)
            held, size = ([rest] if rest.num_rows else []), rest.num_rows
    if size:
        yield _joined(held)


def frame(ctx: Context, source: str, valid_us: int, known_us: int | None) -> pl.DataFrame:
    """`Source.snapshot`'s rows: key and record fields as text (a GIS source's geometry
    last), columns in the source's field order."""
    import polars as pl  # lazy: keeps `import feedledger` and --help light
    import pyarrow as pa  # lazy: as polars

    from feedledger.ledger.encoding.columns import (  # lazy: numba's compiled loops
        UnknownField,
        fields_of,
        text_columns,
    )
    from feedledger.pipeline.exports import snapshot as snapshot_export  # lazy: SQLAlchemy, Arrow

    parts: list[pa.Table] = []
    for batch in snapshot_export.batches(ctx, source, valid_us, known_us):
        attributes = batch.column("attributes")
        names = fields_of(attributes[0].as_py())
        try:
            texts = text_columns(attributes, names)
        except UnknownField:  # entities with different fields: every one's
            names = sorted({n for t in attributes.to_pylist() for n in fields_of(t)})
            texts = text_columns(attributes, names)
        cols = dict(zip(names, texts, strict=True))
        if "geometry" in batch.schema.names:
            cols["geometry"] = batch.column("geometry")
        parts.append(pa.table(cols))
    if not parts:
        return pl.DataFrame()
    table = pa.concat_tables(parts, promote_options="default")
    found = pl.from_arrow(table)
    assert isinstance(found, pl.DataFrame)
    order = snapshot_export.column_order(ctx, source, valid_us, known_us)
    return found.select(snapshot_export.ordered_columns(found.columns, order))


def snapshot_gap(
    ctx: Context, source: str, valid_us: int, known_us: int | None
) -> SnapshotGap | None:
    """The standing gap `valid_us` falls in, with the observations around it."""
    from feedledger.pipeline import query  # lazy: SQLAlchemy, Arrow

    found = query.snapshot_gap(ctx, source, valid=valid_us, known_at=known_us)
    if found is None:
        return None
    return SnapshotGap(
        Gap.of(found["gap"]),
        opt_dt(found["last_observed_at"]),
        opt_dt(found["next_observed_at"]),
    )


def gap_check(ctx: Context, source: str, valid_us: int, known_us: int | None, strict: bool) -> None:
    """A snapshot at `valid_us` inside a standing gap: `InGap` if `strict`, else a
    `GapWarning` (the rows are the state as last observed, not an observation)."""
    inside = snapshot_gap(ctx, source, valid_us, known_us)
    if inside is None:
        return
    text = gap_text(source, str(iso(valid_us)), inside)
    if strict:
        raise InGap(
            text + "; nothing read",
            inside,
            source=source,
            hint="strict=False to read the state as last observed",
        )
    warnings.warn(
        GapWarning(f"source {source!r}: {text}; the rows are the state as last observed", inside),
        stacklevel=3,
    )
