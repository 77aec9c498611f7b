"""Snapshot writers over Arrow batches (`ledger.readers.snapshot_rows.batches`): CSV, JSON
lines and Parquet, column-wise -- no Python object per entity on the common path.

* **csv**: columns are the first entity's fields in the source's order
  (`order.ordered`); an entity with a field outside them is refused ("entities
  have different fields"), one lacking a field gets an empty cell. Cells are the
  values as `encoding.columns.batch_frame` gives them (a batch in the stored form is
  split at its field tokens, `encoding.split`: no JSON parsing); quoting is Python's
  `csv.writer` (QUOTE_MINIMAL, `\\n` line ends), which polars' CSV writer ("necessary"
  quoting) matches once an empty string is written as an empty cell -- except a field
  holding `\\r` where this Python's csv does not quote it, and a single column (an
  empty cell alone is quoted): those batches go through `csv.writer` itself.
  A batch in the stored form with two columns or more is first rendered by a
  compiled loop (`ledger.stored_render`, `spliced`): the rows in the flat
  form straight to their lines, the others the way above, spliced in row order.
* **jsonl**: each entity's attributes text on its own line, canonical JSON (decoded
  from its stored form when the batch holds that).
* **parquet**: the same columns as the CSV, each a string column (the value as stated:
  numbers keep their literal text), null for JSON null or an absent field; a GIS
  source adds `geometry` (GeoJSON text) last. The columns of a stored-form batch's
  flat rows come from the same compiled loop.

Each writer takes a binary handle and returns the number of entities written.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import IO

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from feedledger.ahead import ahead
from feedledger.ledger.encoding import render
from feedledger.ledger.encoding.codec import plan_book
from feedledger.ledger.encoding.columns import (
    UnknownField,
    batch_frame,
    canonical_texts,
    concatenated,
    first_fields,
    with_codebooks,
)
from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports import spliced
from feedledger.pipeline.exports.order import ordered
from feedledger.pipeline.intake.stages import Stage

__all__ = ["columns_of", "warm", "write_csv", "write_jsonl", "write_parquet"]

DIFFERENT = "entities have different fields; use --format jsonl"


def columns_of(first: pa.RecordBatch, order: list[str]) -> tuple[list[str], list[str]]:
    """The stored field names of a batch's first entity, and the same in `order`."""
    names = first_fields(first)
    return names, ordered(names, order)


def _cells(got: pa.RecordBatch, names: list[str], columns: list[str]) -> pl.DataFrame:
    try:
        frame = batch_frame(got, names)
    except UnknownField:
        raise ConfigError(DIFFERENT) from None
    return frame.select(columns)


def _nonempty(source: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return (b for b in source if b.num_rows)


@cache
def _csv_quotes_cr() -> bool:
    """Whether this Python's csv.writer quotes a field holding a carriage return."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["a\rb"])
    return buf.getvalue().startswith('"')


def write_csv(batches: Iterable[pa.RecordBatch], handle: IO[bytes], order: list[str]) -> int:
    n = 0
    columns: list[str] = []
    general: Callable[[pa.RecordBatch, IO[bytes]], None] | None = None
    for got in _nonempty(batches):
        if general is None:
            names, columns = columns_of(got, order)
            _header(handle, columns)
            general = _csv_rows(names, columns)
        if len(columns) < 2 or not spliced.csv(got, handle, columns, general, DIFFERENT):
            general(got, handle)
        n += got.num_rows
    return n


def _csv_rows(names: list[str], columns: list[str]) -> Callable[[pa.RecordBatch, IO[bytes]], None]:
    """The general CSV writer of a batch's rows (`encoding.columns.batch_frame`)."""

    def write(got: pa.RecordBatch, handle: IO[bytes]) -> None:
        frame = _cells(got, names, columns)
        if _by_python(frame, columns):
            _python_rows(handle, frame)
        else:
            blank = [
                pl.when(pl.col(c) == "").then(None).otherwise(pl.col(c)).alias(c) for c in columns
            ]
            frame.select(blank).write_csv(handle, include_header=False, line_terminator="\n")

    return write


def _header(handle: IO[bytes], columns: list[str]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(columns)
    handle.write(buf.getvalue().encode("utf-8"))


def _by_python(frame: pl.DataFrame, columns: list[str]) -> bool:
    if len(columns) == 1:
        return True
    if _csv_quotes_cr():
        return False
    holds_cr = frame.select(pl.any_horizontal(pl.all().str.contains("\r", literal=True).any()))
    return bool(holds_cr.item())


def _python_rows(handle: IO[bytes], frame: pl.DataFrame) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = [c.to_list() for c in frame.get_columns()]
    for row in zip(*cols, strict=True):
        writer.writerow(["" if v is None else v for v in row])
    handle.write(buf.getvalue().encode("utf-8"))


def _arrow(frame: pl.DataFrame) -> pa.Table:
    """A frame of String columns as an Arrow table of `string` columns."""
    table = frame.to_arrow()
    schema = pa.schema([(name, pa.string()) for name in table.column_names])
    return table.cast(schema)


def _general_table(names: list[str], columns: list[str]) -> Callable[[pa.RecordBatch], pa.Table]:
    """The general Parquet columns of a batch (`encoding.columns.batch_frame`)."""
    return lambda got: _arrow(_cells(got, names, columns))


def write_jsonl(batches: Iterable[pa.RecordBatch], handle: IO[bytes]) -> int:
    n = 0
    for got in _nonempty(batches):
        lines = pc.binary_join_element_wise(canonical_texts(got), pa.scalar("\n"), "")
        handle.write(concatenated(lines).to_pybytes())
        n += got.num_rows
    return n


def _tables(batches: Iterable[pa.RecordBatch], order: list[str]) -> Iterator[pa.Table]:
    """Each batch's Parquet columns (`geometry` last when the batch has one)."""
    columns: list[str] = []
    general: Callable[[pa.RecordBatch], pa.Table] | None = None
    for got in _nonempty(batches):
        if general is None:
            names, columns = columns_of(got, order)
            general = _general_table(names, columns)
        table = spliced.table(got, columns, general, DIFFERENT)
        if table is None:
            table = general(got)
        if "geometry" in got.schema.names and "geometry" not in columns:
            table = table.append_column("geometry", got.column("geometry"))
        yield table


def write_parquet(
    batches: Iterable[pa.RecordBatch],
    target: Path,
    order: list[str],
    key: Sequence[str] = (),
) -> int:
    """The columns are made in a thread of their own (`ahead`), one batch ahead of
    pyarrow's writer: both let go of the GIL for most of their work. Dictionary
    encoding only for the columns that repeat (`_repeating`).

    Row-group statistics (min/max, null count) only for the `key` fields: the rows come
    in key order, so theirs are what lets a reader skip row groups (`WHERE parcel_id =
    ...`); any other column's values are spread over every row group, its min/max
    would skip none. Computing them for every column took ~0.1 of the ~0.5 CPU s
    pyarrow spends writing 1M parcels (12 string columns)."""
    import pyarrow.parquet as pq  # lazy: Parquet only (CSV and JSON lines need none)

    n = 0
    writer: pq.ParquetWriter | None = None
    tables = ahead(_tables(batches, order), depth=1, name="feedledger-parquet")
    try:
        for table in tables:
            if writer is None:
                writer = pq.ParquetWriter(
                    target,
                    table.schema,
                    use_dictionary=_repeating(table),
                    write_statistics=[k for k in key if k in table.column_names],
                )
            writer.write_table(table)
            n += table.num_rows
        if writer is None:  # no entity: an empty file with no columns
            pq.write_table(pa.table({}), target)
    finally:
        tables.close()
        if writer is not None:
            writer.close()
    return n


def _repeating(first: pa.Table) -> list[str]:
    """The columns of the first batch whose distinct values are fewer than half its rows
    (zoning, city, flood zone...), the ones worth a dictionary. pyarrow tries one for
    every column by default and falls back page by page where it grows too big: on 1M
    parcels (12 string columns) writing took 0.60 CPU s that way, 0.48 with dictionaries
    for the repeating columns only, and the file was 34 MiB instead of 38."""
    half = first.num_rows / 2
    return [
        name
        for name in first.column_names
        if name != "geometry" and pc.count_distinct(first.column(name)).as_py() < half
    ]


def warm() -> None:
    """Run the streamed writers (CSV, JSON lines) once over a small batch in the stored
    form, made here, so that what their first use costs is paid now rather than inside
    a caller's first snapshot: numba loading the renderer's compiled loops
    (`ledger/encoding/render_kernel.py`), the libraries' code and allocators on their first run.
    Measured in a fresh `feedledger serve` (2026-12-01): the first export of rows grew it
    by ~210 MiB (+105 MiB anonymous, +106 MiB file-backed code pages) before the loops
    were compiled and ~110 MiB more with them, the same for 100k rows as for 1M; a
    second 1M-row export by ~10-20 MiB."""
    batch = _sample()
    write_csv([batch], io.BytesIO(), list(_SAMPLE_FIELDS))
    write_jsonl([batch], io.BytesIO())


def loading(fmt: str) -> Stage[None] | None:
    """Start loading the compiled loops the `fmt` writer renders with (numba's import
    and its cached code: ~0.3 CPU s of Python, once per process) as a `Stage` (a
    thread of its own), while the caller starts its fetch; the caller waits for it when
    done. Loaded on the first batch instead, the pipeline waited for it: the fetch and
    the PostgreSQL server's scan stalled behind one batch (a 1M-parcel PostgreSQL
    Parquet snapshot, alternated whole processes: 2.37-2.56 s before, 2.21-2.35 s with
    this). None when there is nothing to load (JSON lines, or loaded already)."""
    if fmt not in ("csv", "parquet") or fmt in _LOADED:
        return None
    _LOADED.add(fmt)
    return Stage("load", lambda: _load(fmt))


_LOADED: set[str] = set()
_SAMPLE_FIELDS = ("a", "b", "n")


def _load(fmt: str) -> None:
    try:
        if fmt == "csv":
            render.csv_lines(_sample(), list(_SAMPLE_FIELDS))
        else:
            render.string_columns(_sample(), list(_SAMPLE_FIELDS))
    except Exception:  # only a head start: the export meets any error itself
        _LOADED.discard(fmt)


def _sample() -> pa.RecordBatch:
    """A small batch in the stored form (its codebook made here), of `_SAMPLE_FIELDS`."""
    texts = [f'{{"a":"{i}, {i}","b":"v\\"{i}","n":{i}}}' for i in range(8)]
    book = plan_book(texts)
    stored = book.encode_series(pl.Series(texts)).to_arrow().cast(pa.string())
    fields = [("key", pa.string()), ("attributes", pa.string()), ("fields_id", pa.int64())]
    schema = with_codebooks(pa.schema(fields), {1: book})
    keys = pa.array([str(i) for i in range(len(texts))])
    return pa.record_batch([keys, stored, pa.array([1] * len(texts), pa.int64())], schema=schema)
