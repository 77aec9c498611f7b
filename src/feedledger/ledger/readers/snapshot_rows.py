"""What a snapshot export reads: the entities present at a valid time (streamed) and
the layout of the payload in force then (its field order and CRS).

`batches` streams Arrow record batches of `key`, `attributes` (the canonical JSON
text, decoded from its stored form by `codebooks.decode_arrow`) and, asked for,
`geometry` (GeoJSON text or null) of every entity present at `valid_at` as known at
`known_at`, in key order. It reads the source's versions in
the index's order (`visibility.key_ordered_sql`: no sort, no window function, one pass
whatever the number of days stored) through the driver's bulk path
(`ledger.readers.arrow_fetch`) and keeps each key's latest (`visibility.latest_of_ordered`, in
a thread of its own ahead of the reader: `feedledger.ahead`);
a key's versions that straddle two fetched batches are carried to the next. `rows` is
the same as Python tuples. `encoding.columns.text_columns` turns the attributes of a
batch into one column per field; with `stored=True` the batches keep the texts as
stored, with their `fields_id` and the codebooks (`encoding.columns.batch_frame`
splits those without decoding them). `layout` is the newest payload of the source applied
at or before `valid_at` (as known at `known_at`): its id and content hash, its field
names in stated order (`payloads.fields`, a JSON list; None when not recorded) and
its CRS as stated (`payloads.crs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import select

from feedledger.ahead import ahead
from feedledger.ledger.encoding import codebooks
from feedledger.ledger.encoding.columns import with_codebooks
from feedledger.ledger.readers import arrow_fetch
from feedledger.ledger.schema import applications, payloads
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import (
    key_ordered_sql,
    latest_of_ordered,
    visible,
    visible_sql,
)

__all__ = ["BATCH_ROWS", "PayloadLayout", "batches", "layer_rows", "layout", "rows"]

BATCH_ROWS = 4096
STREAM_CACHE_KIB = arrow_fetch.STREAM_CACHE_KIB

_SCAN = [
    ("key", pa.string()),
    ("valid_from", pa.int64()),
    ("txn_seq", pa.int64()),
    ("deleted", pa.bool_()),
    ("attributes", pa.string()),
    ("fields_id", pa.int64()),  # the codebook of the stored text (ledger/encoding/codebooks.py)
]

_NARROW = ["key", "valid_from", "txn_seq", "deleted"]  # what the latest row is told by

_NOT_NULL = {
    "attributes": "COALESCE(attributes, '') AS attributes",
    "geometry": "COALESCE(geometry, '') AS geometry",
}


@dataclass(frozen=True, slots=True)
class PayloadLayout:
    """The payload in force at a valid time: what a snapshot's columns follow."""

    payload_id: str
    sha256: str
    fields: list[str] | None  # as stated, in order; None: not recorded
    crs: str | None
    published_at: int | None = None  # its publisher time: the state stands from then


def batches(
    store: Store,
    source: str,
    valid_at: int,
    known_at: int | None = None,
    *,
    geometry: bool = False,
    batch: int = BATCH_ROWS,
    stored: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Stream batches (`key`, `attributes`, and `geometry` if asked for) of every
    entity present at `valid_at` as known at `known_at`, in key order; `stored`: the
    attributes as stored, `fields_id` after them, the codebooks in the schema's
    metadata (`encoding.columns.batch_frame`)."""
    fields = _SCAN + ([("geometry", pa.string())] if geometry else [])
    scan = pa.schema(fields)
    out = ["key", "attributes"] + (["fields_id"] if stored else [])
    out += ["geometry"] if geometry else []
    vis = visible_sql(":known" if known_at is not None else None)
    # the texts are never null in the fetch ('' instead: no stated JSON value is empty):
    # a driver that types a column by its first batch (the ADBC drivers do) would type
    # one of nulls only INT64, refusing the texts after it (`_nulls_back` restores them)
    cols = [_NOT_NULL.get(c, c) for c in scan.names]
    sql = key_ordered_sql(cols, f"source = :source AND valid_from <= :valid AND {vis}")
    params: dict[str, Any] = {"source": source, "valid": valid_at}
    if known_at is not None:
        params["known"] = known_at
    present = _Present(out, codebooks.load(store, source), stored)
    found = arrow_fetch.batches(store, sql, params, scan, batch=batch)
    latest = _latest(found, present)
    # the per-key pass runs ahead too, beside the fetch's thread and the reader
    if arrow_fetch.threadable(store):
        return ahead(latest, depth=arrow_fetch.PREFETCH, name="feedledger-latest")
    return latest


def _latest(
    found: Iterator[pa.RecordBatch], present: Callable[[pa.Table], Iterator[pa.RecordBatch]]
) -> Iterator[pa.RecordBatch]:
    carry: pa.Table | None = None
    for got in found:
        table = _nulls_back(pa.Table.from_batches([got]))
        if carry is not None and carry.num_rows:
            table = pa.concat_tables([carry, table])
        if table.num_rows == 0:
            continue
        # the last key's rows may go on in the next batch: keep them back
        keys = table.column("key")
        tail = pc.sum(pc.equal(keys, keys[-1])).as_py()
        carry = table.slice(table.num_rows - tail)
        done = table.slice(0, table.num_rows - tail)
        if done.num_rows:
            yield from present(done)
    if carry is not None and carry.num_rows:
        yield from present(carry)


def _nulls_back(table: pa.Table) -> pa.Table:
    for name in _NOT_NULL:
        if name in table.column_names:
            col = table.column(name)
            empty = pc.equal(col, "")
            if pc.any(empty).as_py():
                at = table.column_names.index(name)
                table = table.set_column(at, name, pc.if_else(empty, None, col))
    return table


class _Present:
    """Of a key-ordered slice of the scan, each key's latest row if not deleted, in
    the batches' output form."""

    def __init__(self, out: list[str], books: dict[int, codebooks.Codebook], stored: bool):
        self.out = out
        self.wide = sorted(set(out) | {"fields_id"}, key=[*out, "fields_id"].index)
        self.books = books
        self.stored = stored
        self.schema: pa.Schema | None = None

    def __call__(self, rows: pa.Table) -> Iterator[pa.RecordBatch]:
        # the latest rows are found on the narrow columns and the wide ones (the
        # texts) taken once, rather than copied by each step
        narrow = rows.select(_NARROW).append_column("_row", pa.array(np.arange(rows.num_rows)))
        latest = latest_of_ordered(narrow)
        kept = latest.filter(pc.invert(latest.column("deleted")))
        if not kept.num_rows:
            return
        # (a key's rows are contiguous: the kept ones are in row order, and a mask
        # filters chunk by chunk where `take` would join the chunks first)
        mask = np.zeros(rows.num_rows, np.bool_)
        mask[kept.column("_row").to_numpy()] = True
        picked = rows.select(self.wide).filter(pa.array(mask))
        if not self.stored:
            at = picked.column_names.index("attributes")
            ids = picked.column("fields_id")
            texts = codebooks.decode_arrow(self.books, ids, picked.column(at))
            picked = picked.set_column(at, "attributes", texts)
        picked = picked.select(self.out)
        if self.stored:
            if self.schema is None:
                self.schema = with_codebooks(picked.schema, self.books)
            picked = picked.replace_schema_metadata(self.schema.metadata)
        yield from picked.combine_chunks().to_batches()


def layer_rows(
    store: Store, source: str, valid_at: int, known_at: int | None = None, *, batch: int = 65_536
) -> Iterator[pa.RecordBatch]:
    """Stream batches of `key`, `valid_from` (of the version in force) and `geometry`
    (GeoJSON text or null) of every entity present at `valid_at` as known at
    `known_at`, in key order: what a layer's spatial index is built from (no
    attributes read or decoded)."""
    scan = pa.schema([*_SCAN[:4], ("geometry", pa.string())])
    vis = visible_sql(":known" if known_at is not None else None)
    cols = [_NOT_NULL.get(c, c) for c in scan.names]
    sql = key_ordered_sql(cols, f"source = :source AND valid_from <= :valid AND {vis}")
    params: dict[str, Any] = {"source": source, "valid": valid_at}
    if known_at is not None:
        params["known"] = known_at
    found = arrow_fetch.batches(store, sql, params, scan, batch=batch)
    return _latest(found, _present_narrow)


def _present_narrow(rows: pa.Table) -> Iterator[pa.RecordBatch]:
    latest = latest_of_ordered(rows)
    kept = latest.filter(pc.invert(latest.column("deleted")))
    if kept.num_rows:
        yield from kept.select(["key", "valid_from", "geometry"]).combine_chunks().to_batches()


def rows(
    store: Store,
    source: str,
    valid_at: int,
    known_at: int | None = None,
    *,
    geometry: bool = False,
    batch: int = BATCH_ROWS,
) -> Generator[tuple[str, str, str | None], None, None]:
    """Stream (key, attributes JSON, geometry) of every entity present at `valid_at`;
    geometry is None unless asked for (`geometry=True`, a GIS source)."""
    for got in batches(store, source, valid_at, known_at, geometry=geometry, batch=batch):
        keys = got.column(0).to_pylist()
        attrs = got.column(1).to_pylist()
        shapes = got.column(2).to_pylist() if geometry else [None] * len(keys)
        yield from zip(keys, attrs, shapes, strict=True)


def layout(
    store: Store, source: str, valid_at: int, known_at: int | None = None
) -> PayloadLayout | None:
    """The newest payload of `source` applied at or before `valid_at` that stands as
    known at `known_at`, with its recorded field order and CRS; None if none."""
    a, p = applications, payloads
    stmt = (
        select(p.c.payload_id, p.c.sha256, p.c.fields, p.c.crs, a.c.published_at)
        .select_from(a.join(p, p.c.payload_id == a.c.payload_id))
        .where(a.c.source == source, a.c.published_at <= valid_at, visible(a, known_at))
        .order_by(a.c.published_at.desc())
        .limit(1)
    )
    with store.engine.connect() as conn:
        row = conn.execute(stmt).first()
    if row is None:
        return None
    return PayloadLayout(
        payload_id=str(row.payload_id),
        sha256=str(row.sha256),
        fields=_fields(row.fields),
        crs=str(row.crs) if row.crs else None,
        published_at=int(row.published_at),
    )


def _fields(stored: str | None) -> list[str] | None:
    if not stored:
        return None
    try:
        names = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(names, list):
        return None
    return [str(n) for n in names]
