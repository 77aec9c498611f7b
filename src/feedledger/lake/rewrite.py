"""An incremental export's commit written by feedledger itself: copy-on-write of only the
files that hold an updated row, the new rows in a file of their own, and one Delta
commit that removes the old files and adds the new ones (with the app transactions).

Equivalent to the MERGE of `lake/target.py` (rows matched on source, valid year and
version id: the matched ones get their new `valid_to` and `retracted_at`, the others are
inserted), without delta-rs's join over the whole partition: per file of the rows'
partitions whose `version_id` range (the file's stats) holds one of the rows' ids, only
its `version_id` column is read; a file holding none is left alone, a file holding some
is read a row group at a time, patched with Arrow and written again. delta-rs 1.6 writes no deletion
vectors, so a changed row still costs its file's rewrite; what this saves is the join,
and the reading of the files no row touches.

Rewritten and new rows are filed apart by whether they are open (`_Files`): the
closed history is then left alone by later exports. Used for a local table whose
columns already include every column of the rows (no schema change); anything else --
an S3 table, a new attribute column -- goes through
delta-rs's merge (`applies` says which). Files are written with pyarrow (Parquet,
snappy, as delta-rs writes them), partition columns in the path only, with the stats
delta-rs prunes by (`numRecords`, `version_id`'s range, null counts).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa

__all__ = ["applies", "rewrite"]

PARTITIONS = ("source", "valid_year")
GROUP_ROWS = 131_072  # rows per row group, read and written: the memory a rewrite holds
_PATCHED = ("valid_to", "retracted_at")
# the columns whose range and null count a new file's AddAction states (delta-rs's own
# files state every column's; these are what a reader of history filters on)
_STATS = ("key", "valid_from", "valid_to", "recorded_at", "retracted_at", "version_id")
_STAT_TEXT = 32  # a longer string's range is not stated (a cut max would be too low)


def applies(uri: str, table_schema: pa.Schema, rows: pa.Schema) -> bool:
    """Whether `rewrite` can commit `rows` to the table: a local one, and every column of
    the rows already in the table with the same type."""
    if "://" in uri:
        return False
    have = {f.name: f.type for f in table_schema}
    return all(f.name in have and have[f.name] == f.type for f in rows)


def rewrite(lib: Any, table: Any, root: str, rows: pa.Table, props: Any) -> None:
    """Commit `rows` to `table` (a DeltaTable at local folder `root`) as one Delta commit:
    the rows already there updated in place (copy-on-write of their files), the others
    appended. `lib`: the deltalake module; `props`: the commit's CommitProperties."""
    import pyarrow.compute as pc  # lazy: as the readers

    schema = pa.schema(table.schema().to_arrow())
    data_schema = pa.schema([f for f in schema if f.name not in PARTITIONS])
    files = pa.table(table.get_add_actions(flatten=True))
    adds: list[Any] = []
    removes: list[Any] = []
    matched = pa.array([False] * rows.num_rows, pa.bool_())
    now_ms = int(time.time() * 1000)
    for source, year in _partitions(rows):
        here = pc.and_(
            pc.equal(rows.column("source"), source), pc.equal(rows.column("valid_year"), year)
        )
        ids = pc.filter(rows.column("version_id"), here).combine_chunks()
        for path, size in _candidates(files, source, year, ids):
            out = _Files(lib, root, data_schema, source, year, now_ms)
            hit = _patched(root, path, rows, ids, here, out)
            if hit is None:
                continue
            matched = pc.or_(matched, hit)
            adds.extend(out.close())
            removes.append(
                lib.transaction.RemoveAction(path, True, now_ms, size, _values(source, year))
            )
    inserts = rows.filter(pc.invert(matched))
    for source, year in _partitions(inserts):
        here = pc.and_(
            pc.equal(inserts.column("source"), source), pc.equal(inserts.column("valid_year"), year)
        )
        out = _Files(lib, root, data_schema, source, year, now_ms)
        out.write(inserts.filter(here).drop_columns(list(PARTITIONS)))
        adds.extend(out.close())
    table.create_write_transaction(
        [*adds, *removes],
        mode="append",
        schema=table.schema(),
        partition_by=list(PARTITIONS),
        commit_properties=props,
    )


def _partitions(rows: pa.Table) -> list[tuple[str, int]]:
    if rows.num_rows == 0:
        return []
    pairs = rows.select(list(PARTITIONS)).group_by(list(PARTITIONS)).aggregate([])
    return list(
        zip(pairs.column("source").to_pylist(), pairs.column("valid_year").to_pylist(), strict=True)
    )


def _values(source: str, year: int) -> dict[str, str | None]:
    return {"source": source, "valid_year": str(year)}


def _candidates(
    files: pa.Table, source: str, year: int, ids: pa.Array
) -> Iterator[tuple[str, int]]:
    """The files of partition (source, year) whose version_id range may hold one of
    `ids` (a file without stats is a candidate)."""
    import numpy as np  # lazy: as pyarrow.compute

    wanted = np.sort(ids.to_numpy(zero_copy_only=False))
    col = files.column
    sources = col("partition.source").to_pylist()
    years = col("partition.valid_year").to_pylist()
    lows = col("min.version_id").to_pylist() if "min.version_id" in files.column_names else None
    highs = col("max.version_id").to_pylist() if "max.version_id" in files.column_names else None
    for i, (path, size) in enumerate(
        zip(col("path").to_pylist(), col("size_bytes").to_pylist(), strict=True)
    ):
        if sources[i] != source or str(years[i]) != str(year):
            continue
        if lows is not None and highs is not None and lows[i] is not None and highs[i] is not None:
            at = int(np.searchsorted(wanted, lows[i], side="left"))
            if at >= len(wanted) or wanted[at] > highs[i]:
                continue
        yield str(path), int(size)


def _patched(
    root: str, path: str, rows: pa.Table, ids: pa.Array, here: pa.Array, out: _Files
) -> pa.Array | None:
    """The file at `path` written again to `out`, a row group at a time, its rows among
    `ids` given their new `valid_to` and `retracted_at`; which of `rows` it matched
    (None, and nothing written, when it holds none of them)."""
    import pyarrow.compute as pc  # lazy: as the readers
    import pyarrow.parquet as pq  # lazy: as the readers

    full = os.path.join(root, unquote(path))
    own = pq.read_table(full, columns=["version_id"]).column("version_id")
    if pc.index_in(own, value_set=ids).null_count == len(own):
        return None
    positions = pc.indices_nonzero(here)  # rows' index of each of `ids`
    got: list[pa.Array] = []
    for batch in pq.ParquetFile(full).iter_batches(batch_size=GROUP_ROWS):
        part = pa.Table.from_batches([batch])
        at = pc.index_in(part.column("version_id"), value_set=ids)
        hit = pc.is_valid(at)
        for name in _PATCHED:
            news = rows.column(name).take(positions).take(at)
            col = part.schema.get_field_index(name)
            part = part.set_column(col, name, pc.if_else(hit, news, part.column(name)))
        got.extend(pc.drop_null(at).cast(pa.int64()).chunks)
        out.write(part)
    found = pc.unique(pa.chunked_array(got, pa.int64()))
    return pc.is_in(pa.array(range(rows.num_rows), pa.int64()), value_set=positions.take(found))


class _Files:
    """The new files of one partition, written as rows come: open rows (no `valid_to`,
    not retracted: the ones a later version closes) and closed ones (changed only by a
    retraction or a backfill) filed apart, so a later export's copy-on-write touches
    the open rows' files and leaves the closed history alone -- its cost follows the
    live keys, not the history's length."""

    def __init__(
        self, lib: Any, root: str, schema: pa.Schema, source: str, year: int, now_ms: int
    ) -> None:
        self.lib, self.root, self.schema = lib, root, schema
        self.source, self.year, self.now_ms = source, year, now_ms
        self.folder = f"source={quote(source, safe='')}/valid_year={year}"
        self._open: dict[bool, _File] = {}

    def write(self, data: pa.Table) -> None:
        """`data` (no partition columns), given every column of the table's schema."""
        import pyarrow.compute as pc  # lazy: as the readers

        cols = [
            data.column(f.name).cast(f.type)
            if f.name in data.column_names
            else pa.nulls(data.num_rows, f.type)
            for f in self.schema
        ]
        data = pa.Table.from_arrays(cols, schema=self.schema)
        live = pc.and_(pc.is_null(data.column("valid_to")), pc.is_null(data.column("retracted_at")))
        for is_open, part in ((True, data.filter(live)), (False, data.filter(pc.invert(live)))):
            if part.num_rows:
                if is_open not in self._open:
                    self._open[is_open] = _File(self.root, self.folder, self.schema)
                self._open[is_open].write(part)

    def close(self) -> list[Any]:
        """The AddActions of the files written."""
        values = _values(self.source, self.year)
        return [f.close(self.lib, values, self.now_ms) for f in self._open.values()]


class _File:
    """One Parquet file being written, with the stats its AddAction carries."""

    def __init__(self, root: str, folder: str, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq  # lazy: as the readers

        os.makedirs(os.path.join(root, folder), exist_ok=True)
        self.rel = f"{folder}/part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        self.full = os.path.join(root, folder, os.path.basename(self.rel))
        self.writer = pq.ParquetWriter(self.full, schema, compression="snappy")
        self.rows = 0
        self.low: dict[str, Any] = {}
        self.high: dict[str, Any] = {}
        self.nulls = dict.fromkeys(_STATS, 0)

    def write(self, data: pa.Table) -> None:
        import pyarrow.compute as pc  # lazy: as the readers

        self.writer.write_table(data, row_group_size=GROUP_ROWS)
        self.rows += data.num_rows
        for name in _STATS:
            column = data.column(name)
            self.nulls[name] += column.null_count
            if column.null_count == len(column):
                continue
            found = pc.min_max(column).as_py()
            low, high = self.low.get(name), self.high.get(name)
            self.low[name] = found["min"] if low is None else min(low, found["min"])
            self.high[name] = found["max"] if high is None else max(high, found["max"])

    def close(self, lib: Any, values: dict[str, str | None], now_ms: int) -> Any:
        self.writer.close()
        stats = {
            "numRecords": self.rows,
            "minValues": {n: _stat(v) for n, v in self.low.items() if _fits(v)},
            "maxValues": {n: _stat(v) for n, v in self.high.items() if _fits(v)},
            "nullCount": self.nulls,
        }
        size = os.path.getsize(self.full)
        return lib.transaction.AddAction(self.rel, size, values, now_ms, True, json.dumps(stats))


def _fits(value: Any) -> bool:
    return not isinstance(value, str) or len(value) <= _STAT_TEXT


def _stat(value: Any) -> Any:
    """A value as Delta's stats state it: a timestamp in ISO 8601 UTC to the
    millisecond, cut (as delta-rs writes them), else as is."""
    from datetime import datetime  # lazy: only for a timestamp column's stats

    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value
