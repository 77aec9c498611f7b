"""Typed (Arrow) columns as canonical JSON values, vectorised: the GIS readers' properties.

Each property column becomes one polars String column of *texts* plus a kind:

* **string**: the value itself (a JSON string, escaped and quoted only when an
  attribute text is built, `Observations.attributes`): Arrow strings; dates, times and
  datetimes as ISO 8601 text (`2024-01-02`, `2024-01-02T03:04:05.120000+00:00`, as
  Python's `isoformat` and so the Parquet reader write them); binary as base64.
* **literal**: the canonical JSON text of the value: integers as their digits, floats
  as Python's `repr` writes them, the shortest round-trip text (`12.5`, `1e+20`,
  `1e-05`), as the Parquet reader does, NaN and infinities as the JSON
  strings `"nan"`, `"inf"`, `"-inf"` (as the Parquet reader), booleans `true`/`false`,
  decimals as their digits, lists, structs and GDAL's JSON sub-typed strings as their
  canonical JSON (`formats/canonical.py`; the only per-value Python path, for columns
  of those rare types only).

A null is null whatever the kind. The content hash is the fold of `formats/canonical.py`
over the fields in code-point order of their names (tag 1 null, 2 string, 3 literal),
computed column by column: the same hash as the JSON reader gives the same record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import polars as pl
import pyarrow as pa

from feedledger.formats.canonical import (
    PRIME,
    SEED,
    TAG_JSON,
    TAG_NULL,
    TAG_STRING,
    RawNumber,
    canonical,
    columns_needing_escape,
    json_value,
    name_hashes,
    quoted,
)
from feedledger.formats.observations import clip
from feedledger.model.errors import BadPayloadError

__all__ = ["TypedTexts", "fold", "key_expr", "typed_hashes", "typed_texts"]

_U64 = pl.UInt64
_JSON_EXTENSION = "arrow.json"


@dataclass(frozen=True)
class TypedTexts:
    """One String column of texts per property (in the table's order) and the names of
    those holding JSON literal text (the others hold plain strings)."""

    frame: pl.DataFrame
    literal: frozenset[str]


def typed_texts(table: pa.Table) -> TypedTexts:
    """The texts of every column of `table` (module docstring)."""
    columns: list[pl.Series] = []
    literal: set[str] = set()
    for name, column in zip(table.column_names, table.columns, strict=True):
        series, is_literal = _column_texts(name, column)
        columns.append(series)
        if is_literal:
            literal.add(name)
    return TypedTexts(frame=pl.DataFrame(columns), literal=frozenset(literal))


def _column_texts(name: str, column: pa.ChunkedArray) -> tuple[pl.Series, bool]:
    kind = column.type
    if isinstance(kind, pa.BaseExtensionType):
        storage = pa.chunked_array([c.storage for c in column.chunks], type=kind.storage_type)
        if kind.extension_name == _JSON_EXTENSION:
            return _python_texts(name, storage, json_text=True), True
        return _column_texts(name, storage)
    if pa.types.is_dictionary(kind):
        return _column_texts(name, column.cast(kind.value_type))
    if pa.types.is_null(kind):
        return pl.Series(name, [None] * len(column), dtype=pl.String), False
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _polars(name, column).cast(pl.String), False
    if pa.types.is_string_view(kind):
        return _polars(name, column.cast(pa.string())), False
    if pa.types.is_boolean(kind):
        series = _polars(name, column)
        # (a null stays null: `when` on a null condition takes the `otherwise` branch)
        flag = (
            pl.when(pl.col(name).is_null())
            .then(pl.lit(None, dtype=pl.String))
            .when(pl.col(name))
            .then(pl.lit("true"))
            .otherwise(pl.lit("false"))
        )
        return _select(series, flag), True
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        return _polars(name, column).cast(pl.String), True
    if pa.types.is_floating(kind):
        series = _polars(name, column.cast(pa.float64()))
        col = pl.col(name)
        text = (
            pl.when(col.is_nan())
            .then(pl.lit('"nan"'))
            .when(col == float("inf"))
            .then(pl.lit('"inf"'))
            .when(col == float("-inf"))
            .then(pl.lit('"-inf"'))
            .otherwise(col.cast(pl.String))
        )
        return _python_repr_where_small(series, _select(series, text)), True
    if pa.types.is_date(kind):
        return _select(_polars(name, column), pl.col(name).dt.to_string("%Y-%m-%d")), False
    if pa.types.is_timestamp(kind):
        zone = "%:z" if kind.tz else ""
        return _select(_polars(name, column), _iso(name, "%Y-%m-%dT%H:%M:%S", zone)), False
    if pa.types.is_time(kind):
        return _select(_polars(name, column), _iso(name, "%H:%M:%S", "")), False
    if pa.types.is_duration(kind) and kind.unit == "ns":
        return pl.Series(name, duration_ns_texts(column), dtype=pl.String), False
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        series = _polars(name, column.cast(pa.large_binary()))
        return _select(series, pl.col(name).bin.encode("base64")), False
    return _python_texts(name, column, json_text=False), True


def _python_repr_where_small(values: pl.Series, texts: pl.Series) -> pl.Series:
    """Python's `repr` (as the Parquet reader writes floats) where polars writes a float
    otherwise: below 1e-4 in magnitude (`1e-05`, `1.5e-07`, not `0.00001`, `1.5e-7`);
    only those values, usually none, are formatted in Python."""
    small = values.to_frame().select(
        ((pl.col(values.name).abs() < 1e-4) & (pl.col(values.name) != 0)).arg_true()
    )
    rows = small.to_series()
    if not rows.len():
        return texts
    reprs = pl.Series([repr(v) for v in values.gather(rows).to_list()], dtype=pl.String)
    return texts.scatter(rows, reprs)


def _polars(name: str, column: pa.ChunkedArray) -> pl.Series:
    series = pl.from_arrow(column)
    assert isinstance(series, pl.Series)
    return series.alias(name)


def _select(series: pl.Series, expr: pl.Expr) -> pl.Series:
    return series.to_frame().select(expr.alias(series.name)).to_series()


def _iso(name: str, base: str, zone: str) -> pl.Expr:
    """Python's isoformat: microseconds only when not zero; a nanosecond time (pandas'
    and Spark's default resolution) with nanoseconds under its microseconds keeps them
    all (`...T03:04:05.123456789`), so it is read exactly (Python's datetime cannot)."""
    col = pl.col(name)
    nanos = col.dt.nanosecond()
    return (
        pl.when(nanos == 0)
        .then(col.dt.to_string(base + zone))
        .when(nanos % 1000 == 0)
        .then(col.dt.to_string(base + "%.6f" + zone))
        .otherwise(col.dt.to_string(base + "%.9f" + zone))
    )


def duration_ns_texts(column: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """A nanosecond duration column as Python's `str(timedelta)` writes a duration
    (`1 day, 2:03:04.000005`), with nanoseconds under the microseconds kept
    (`0:00:01.000000001`): the text a microsecond duration of the same value gets."""
    texts: list[str | None] = []
    for value in column.cast(pa.int64()).to_pylist():
        if value is None:
            texts.append(None)
            continue
        micros, nanos = divmod(value, 1000)
        delta = timedelta(microseconds=micros)
        text = str(delta)
        if nanos:
            text += f"{nanos:03d}" if delta.microseconds else f".{0:06d}{nanos:03d}"
        texts.append(text)
    return texts


def nanosecond_texts(column: pa.ChunkedArray) -> pl.Series | None:
    """The texts of a nanosecond time, timestamp or duration column (as the GIS path
    writes them), or None for a column of any other type: Python's datetime holds
    microseconds, so the per-record readers take these texts instead of its values."""
    kind = column.type
    if not (
        (pa.types.is_timestamp(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind))
        and kind.unit == "ns"
    ):
        return None
    series, _literal = _column_texts("value", column)
    return series


def _python_texts(name: str, column: pa.ChunkedArray, *, json_text: bool) -> pl.Series:
    """Canonical JSON of nested values (lists, structs, GDAL's JSON strings): per value."""
    try:
        values = column.to_pylist()
    except (ValueError, OverflowError, pa.ArrowException):
        raise BadPayloadError(unreadable_column(name, column.type)) from None
    if json_text:
        texts = [None if v is None else canonical(_json_loads(v)) for v in values]
    else:
        texts = [None if v is None else canonical(json_value(v)) for v in values]
    return pl.Series(name, texts, dtype=pl.String)


def unreadable_column(name: str, kind: pa.DataType) -> str:
    """The problem of a column whose values cannot be read, in the user's words."""
    text = str(kind)
    if "[ns" in text:
        return (
            f"column {clip(name)!r} holds nanosecond times ({text}) inside a list or "
            "struct: feedledger reads them exactly only as a column of their own"
        )
    return f"cannot read the values of column {clip(name)!r} (type {text})"


def key_expr(texts: TypedTexts, key: list[str]) -> pl.Expr:
    """The canonical key text (`["a",12]`), as the JSON reader writes it."""
    frame = texts.frame
    strings = [k for k in key if k not in texts.literal]
    special = columns_needing_escape(frame.select(strings).rechunk()) if strings else set()
    pieces: list[pl.Expr] = []
    for i, name in enumerate(key):
        pieces.append(pl.lit("[" if i == 0 else ","))
        if name in texts.literal:
            pieces.append(pl.col(name).fill_null("null"))
        else:
            pieces.extend(quoted(name, frame, special))
    pieces.append(pl.lit("]"))
    return pl.concat_str(pieces)


def _xxh(text: pl.Expr) -> pl.Expr:
    hashed: pl.Expr = text.nchash.xxh3_64()  # type: ignore[attr-defined]
    return hashed


def fold(h: pl.Series, value: pl.Series) -> pl.Series:
    """mix(h, value) = ((h XOR value) * PRIME) mod 2**64, elementwise on UInt64."""
    return ((h ^ value) * pl.Series([PRIME], dtype=_U64)).rename("hash")


def typed_hashes(texts: TypedTexts, columns: list[str]) -> pl.Series:
    """The content-hash fold (UInt64, before its signed reinterpretation) of the records
    made of `columns`: the hashes and tags of every column in one parallel select, then
    one vectorised fold step per field."""
    frame = texts.frame
    height = frame.height
    h = pl.repeat(SEED, height, dtype=_U64, eager=True).rename("hash")
    if not columns:
        return h
    ordered = sorted(columns)
    steps = frame.select(
        *[_xxh(pl.col(c)).fill_null(0).alias(f"v{i}") for i, c in enumerate(ordered)],
        *[
            pl.when(pl.col(c).is_null())
            .then(pl.lit(TAG_NULL, dtype=_U64))
            .otherwise(pl.lit(TAG_JSON if c in texts.literal else TAG_STRING, dtype=_U64))
            .alias(f"t{i}")
            for i, c in enumerate(ordered)
        ],
    )
    for i, name_h in enumerate(name_hashes(ordered)):
        h = fold(h, pl.Series([name_h], dtype=_U64))
        h = fold(h, steps.get_column(f"t{i}"))
        h = fold(h, steps.get_column(f"v{i}"))
    return h


def _json_loads(text: str) -> Any:
    """A JSON text parsed keeping number literals (GDAL's JSON sub-typed strings). GDAL
    sub-types a field JSON where features give it values of several kinds (`0` in one,
    `"x"` in another) and writes a string value bare (`x`, or `` for ""): such a value,
    not JSON text, is that string."""
    try:
        return json.loads(text, parse_float=RawNumber, parse_int=RawNumber)
    except ValueError:
        return text
