"""A source's version rows as Arrow, for an export of its whole bitemporal history
(the Delta Lake table, `feedledger.lake`): every version -- retracted ones too -- with
its run and payload, attributes decoded to canonical JSON.

Two reads, both bounded by a transaction instant K (the source's watermark
`recorded_at` when the export starts: every commit of a source stamps a later
instant than the one before, so the rows recorded or retracted by K are exactly
those committed by then, whatever commits while the export reads):

* `touched_keys`: the keys of the versions recorded or retracted in (since, K], found
  through the applications that wrote them (their version ids are a primary-key
  range: no scan of the source's versions);
* `versions`: every version of the source (or of some keys) recorded by K, with
  `retracted_at` as known at K (a retraction after K is not seen yet);
* `versions_by_key`: the same for the whole source in key order, in chunks cut at key
  boundaries (every version of a key in one chunk): a first export streamed in
  bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from sqlalchemy import and_, or_, select

from feedledger.ledger.encoding import codebooks
from feedledger.ledger.readers import arrow_fetch
from feedledger.ledger.schema import applications, versions
from feedledger.ledger.store import Store

__all__ = ["DECODED", "SCHEMA", "touched_keys", "versions_by_key", "versions_of"]

BATCH_ROWS = 65_536
_KEYS_PER_READ = 500

# what `versions_of` returns; `fields_id` is dropped once attributes are decoded
SCHEMA = pa.schema(
    [
        ("version_id", pa.int64()),
        ("key", pa.string()),
        ("valid_from", pa.int64()),
        ("recorded_at", pa.int64()),
        ("txn_seq", pa.int64()),
        ("retracted_at", pa.int64()),
        ("run_id", pa.string()),
        ("payload_id", pa.string()),
        ("backfill", pa.bool_()),
        ("deleted", pa.bool_()),
        ("change", pa.int64()),
        ("revision", pa.string()),
        ("fields_id", pa.int64()),
        ("attributes", pa.string()),
        ("geometry", pa.string()),
    ]
)

# the batches the readers give: SCHEMA without `fields_id`, attributes decoded
DECODED = pa.schema([f for f in SCHEMA if f.name != "fields_id"])

_SELECT = (
    "SELECT v.version_id, v.key, v.valid_from, v.recorded_at, v.txn_seq, v.retracted_at, "
    "a.run_id, a.payload_id, v.backfill, v.deleted, v.change, v.revision, v.fields_id, "
    "v.attributes, v.geometry "
    "FROM versions v JOIN applications a ON a.source = v.source AND a.txn_seq = v.txn_seq "
    "WHERE v.source = :source AND v.recorded_at <= :known"
)


def touched_keys(store: Store, source: str, since: int, known: int) -> list[str]:
    """The keys of `source` whose versions were recorded, or retracted, after `since`
    and by `known` (transaction instants, microseconds)."""
    a = applications
    in_window = or_(
        and_(a.c.recorded_at > since, a.c.recorded_at <= known),
        and_(a.c.retracted_at > since, a.c.retracted_at <= known),
    )
    stmt = select(a.c.first_version_id, a.c.changes).where(
        a.c.source == source, in_window, a.c.changes > 0
    )
    keys: set[str] = set()
    with store.engine.connect() as conn:
        ranges = [(int(r.first_version_id), int(r.changes)) for r in conn.execute(stmt)]
        for first, count in ranges:
            found = conn.execute(
                select(versions.c.key).where(
                    versions.c.version_id >= first, versions.c.version_id < first + count
                )
            )
            keys.update(str(r.key) for r in found)
    return sorted(keys)


def versions_of(
    store: Store, source: str, known: int, keys: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Every version of `source` (of `keys` only, if given) recorded by `known`, as
    batches of SCHEMA without `fields_id`, attributes canonical; a retraction after
    `known` is not seen (`retracted_at` null)."""
    books = codebooks.load(store, source)
    params: dict[str, Any] = {"source": source, "known": known}
    if keys is None:
        yield from _decoded(
            arrow_fetch.batches(store, _SELECT, params, SCHEMA, batch=BATCH_ROWS), books, known
        )
        return
    for start in range(0, len(keys), _KEYS_PER_READ):
        chunk = keys[start : start + _KEYS_PER_READ]
        names = [f"k{i}" for i in range(len(chunk))]
        sql = f"{_SELECT} AND v.key IN ({', '.join(':' + n for n in names)})"
        found = arrow_fetch.batches(
            store, sql, {**params, **dict(zip(names, chunk, strict=True))}, SCHEMA, batch=BATCH_ROWS
        )
        yield from _decoded(found, books, known)


def versions_by_key(
    store: Store, source: str, known: int, *, rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """What `versions_of(store, source, known)` gives, in (key, valid_from, txn_seq)
    order, as chunks of about `rows` rows cut at key boundaries: a key's versions are
    all in one chunk (a key with more versions than `rows` makes a bigger one)."""
    import pyarrow.compute as pc  # lazy: as the snapshot's readers

    books = codebooks.load(store, source)
    sql = f"{_SELECT} ORDER BY v.key"  # (the index's order: no sort step)
    found = arrow_fetch.batches(store, sql, {"source": source, "known": known}, SCHEMA, batch=rows)
    held: pa.Table | None = None  # the last key's rows of the chunk before
    for batch in _decoded(found, books, known):
        table = pa.Table.from_batches([batch])
        if held is not None:
            table = pa.concat_tables([held, table])
        keys = table.column("key")
        last = keys[-1]
        cut = len(table) - int(pc.sum(pc.equal(keys, last)).as_py() or 0)
        held = table.slice(cut)
        if cut:
            yield from table.slice(0, cut).combine_chunks().to_batches()
    if held is not None and len(held):
        yield from held.combine_chunks().to_batches()


def _decoded(
    found: Iterator[pa.RecordBatch], books: dict[int, Any], known: int
) -> Iterator[pa.RecordBatch]:
    import pyarrow.compute as pc  # lazy: as the snapshot's readers

    for batch in found:
        texts = codebooks.decode_arrow(books, batch.column("fields_id"), batch.column("attributes"))
        retracted = batch.column("retracted_at")
        later = pc.fill_null(pc.greater(retracted, known), False)
        seen = pc.if_else(later, pa.scalar(None, pa.int64()), retracted)
        cols = {name: batch.column(name) for name in batch.schema.names if name != "fields_id"}
        cols["attributes"] = texts
        cols["retracted_at"] = seen
        yield pa.record_batch(list(cols.values()), names=list(cols))
