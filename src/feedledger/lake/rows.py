"""A source's versions as the Delta table's rows (Arrow), and which of them an export
writes.

One row per version ever recorded, retracted ones included (history is append-only
there too). Columns: `source`, `valid_year` (the partition columns: the source's name
and the UTC year of `valid_from`), `key` (the key's value as the CLI takes it; a
compound key's JSON array), the attributes as typed columns in the source's field
order (`lake.columns`), for a GIS source `geometry` (ISO WKB; a GeoParquet-style note,
GeoParquet 1.1's `geo` metadata with the CRS as PROJJSON, is the column's metadata `geo`
in the Delta schema), then `valid_from`, `valid_to`, `recorded_at`,
`retracted_at` (timestamp µs UTC), `run_id`, `payload_id`, `deleted`, `backfill`,
`change`, `revision` and `version_id` (the ledger's id of the version: what a merge
matches on).

`valid_to` and `retracted_at` are those `history --include-retracted` gives as known
at the table's position K: a standing version's `valid_to` is the next standing
version's `valid_from` (null for the latest), a retracted version has `retracted_at`
and no `valid_to`. Both can change after a version was exported -- a newer version
closes the one before, a backfill slips in between, a retraction removes one and
reopens its predecessor -- so an incremental export writes the new versions AND the
exported ones whose (`valid_to`, `retracted_at`) as known at K differ from those as
known at the previous position (`changed`): the merge updates those rows in place, and
Delta's own history keeps each earlier state (time travel).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pyarrow as pa

from feedledger.lake import columns as lake_columns

__all__ = ["META", "changed", "delta_rows"]

STAMP = pa.timestamp("us", tz="UTC")
# the columns after the attributes, and the names an attribute may not take as such
META = (
    "valid_from",
    "valid_to",
    "recorded_at",
    "retracted_at",
    "run_id",
    "payload_id",
    "deleted",
    "backfill",
    "change",
    "revision",
    "version_id",
)
_RESERVED = {"source", "valid_year", "key", "geometry", *META}
_CHANGES = ("added", "changed", "deleted")


def _valid_to(frame: pl.DataFrame, visible: pl.Expr, name: str) -> pl.DataFrame:
    """`frame` (key, valid_from, txn_seq order) with `name`: the next visible version's
    valid_from of the same key, null for the latest and for an invisible row."""
    nxt = frame.filter(visible).select(
        "version_id", pl.col("valid_from").shift(-1).over("key").alias(name)
    )
    return frame.join(nxt, on="version_id", how="left")


def changed(versions: pa.Table, since: int | None) -> pa.Table:
    """The rows an export at K writes after one at `since` (None: never exported):
    every version recorded after `since`, and every earlier one whose (valid_to,
    retracted_at) as known at K differs from that as known at `since`. `versions`:
    every version of the keys concerned recorded by K (`retracted_at` as known at K);
    the result adds `valid_to`."""
    frame = pl.from_arrow(versions)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.sort("key", "valid_from", "txn_seq")
    frame = _valid_to(frame, pl.col("retracted_at").is_null(), "valid_to")
    if since is None:
        return _small(frame.to_arrow())
    before = pl.col("recorded_at") <= since
    standing_then = before & (pl.col("retracted_at").is_null() | (pl.col("retracted_at") > since))
    frame = _valid_to(frame, standing_then, "valid_to_then")
    retracted_then = pl.when(pl.col("retracted_at") <= since).then(pl.col("retracted_at"))
    keep = (
        ~before
        | pl.col("valid_to").ne_missing(pl.col("valid_to_then"))
        | pl.col("retracted_at").ne_missing(retracted_then)
    )
    return _small(frame.filter(keep).drop("valid_to_then").to_arrow())


def _small(table: pa.Table) -> pa.Table:
    """polars' large strings as plain ones (what the readers give and Arrow's JSON
    kernels take)."""
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def delta_rows(
    source: str,
    versions: pa.Table,
    order: list[str],
    *,
    geo: bool,
    known_types: dict[str, pa.DataType] | None = None,
) -> pa.Table:
    """`versions` (from `changed`) as the Delta table's rows; attribute columns in
    `order` (fields it lacks after, in code-point order), typed (`lake.columns`; a
    column the table already has keeps its type: `known_types`)."""
    import pyarrow.compute as pc  # lazy: as the readers

    n = versions.num_rows
    valid_from = versions.column("valid_from").cast(pa.int64())
    cols: dict[str, Any] = {
        "source": pa.array([source] * n, pa.string()),
        "valid_year": pc.year(valid_from.cast(STAMP)).cast(pa.int32()),
        "key": _key_texts(versions.column("key").combine_chunks()),
    }
    texts = pc.fill_null(versions.column("attributes"), "{}").combine_chunks()
    names, arrays = lake_columns.typed(texts, order, known_types or {})
    for name, array in zip(names, arrays, strict=True):
        cols[f"attributes.{name}" if name in _RESERVED else name] = array
    if geo:
        cols["geometry"] = _wkb(versions.column("geometry").to_pylist())
    for name in ("valid_from", "valid_to", "recorded_at", "retracted_at"):
        cols[name] = versions.column(name).cast(pa.int64()).cast(STAMP)
    cols["run_id"] = versions.column("run_id")
    cols["payload_id"] = versions.column("payload_id")
    cols["deleted"] = versions.column("deleted").cast(pa.bool_())
    cols["backfill"] = versions.column("backfill").cast(pa.bool_())
    codes = versions.column("change").cast(pa.int32())
    cols["change"] = pa.array(_CHANGES, pa.string()).take(codes)
    cols["revision"] = versions.column("revision").cast(pa.string())
    cols["version_id"] = versions.column("version_id").cast(pa.int64())
    return pa.table(cols)


# a stored single key whose text is its value's between two fixed ends: a string
# without escapes (["0714-22-1"]) or a number ([42]); anything else is parsed
_PLAIN_STRING = r'^\["[^"\\]*"\]$'
_PLAIN_NUMBER = r"^\[-?[0-9][0-9.eE+-]*\]$"


def _key_texts(keys: pa.Array) -> pa.Array:
    """Stored keys (JSON arrays) as the CLI takes them: a single key's value, a compound
    key's JSON array (vectorised for the plain forms; the rest one by one)."""
    import pyarrow.compute as pc  # lazy: as the readers

    keys = keys.cast(pa.string())
    string = pc.match_substring_regex(keys, _PLAIN_STRING)
    number = pc.match_substring_regex(keys, _PLAIN_NUMBER)
    out = pc.if_else(
        string,
        pc.utf8_slice_codeunits(keys, 2, -2),
        pc.if_else(number, pc.utf8_slice_codeunits(keys, 1, -1), keys),
    )
    rest = pc.indices_nonzero(pc.invert(pc.or_(string, number))).to_pylist()
    if not rest:
        return out
    texts = out.to_pylist()
    for i in rest:
        texts[i] = _key_text(texts[i])
    return pa.array(texts, pa.string())


def _key_text(key: str) -> str:
    from feedledger.formats.canonical import RawNumber  # lazy: polars
    from feedledger.ledger.encoding.columns import value_text  # lazy: as the readers

    values = json.loads(key, parse_float=RawNumber, parse_int=RawNumber)
    return str(value_text(values[0])) if len(values) == 1 else key


def _wkb(geometries: list[str | None]) -> pa.Array:
    """GeoJSON texts as stated -> ISO WKB (null kept)."""
    import numpy as np  # lazy: GIS sources only
    import shapely  # lazy: as numpy

    texts = [g if g and g != "null" else None for g in geometries]
    shapes = shapely.from_geojson(np.array(texts, dtype=object))
    return pa.array(list(shapely.to_wkb(shapes, flavor="iso")), pa.binary())


def with_geo_note(table: pa.Table, note: str) -> pa.Table:
    """`table` with `note` as its `geometry` field's metadata `geo` (kept by Delta in
    the column's metadata of the table schema)."""
    at = table.schema.get_field_index("geometry")
    if at < 0:
        return table
    field = table.schema.field(at).with_metadata({"geo": note})
    return table.cast(table.schema.set(at, field))


def geo_note(crs_projjson: dict[str, Any] | None) -> str:
    """The GeoParquet-style note on the `geometry` column (its metadata `geo` in the
    Delta schema): GeoParquet 1.1's file metadata for one WKB column."""
    column: dict[str, Any] = {"encoding": "WKB", "geometry_types": []}
    if crs_projjson is not None:
        column["crs"] = crs_projjson
    return json.dumps(
        {"version": "1.1.0", "primary_column": "geometry", "columns": {"geometry": column}},
        sort_keys=True,
    )
