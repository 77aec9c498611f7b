"""A payload's string columns spilled to a temporary Arrow IPC file, so that a payload
larger than the memory budget does not hold them all: `SpilledRows` writes them as they
are read (record batches of exactly `batch_rows` rows, in record order) and gives back
the rows of any record indexes, reading only the batches that hold them (the file is
read, never memory-mapped: what it gives back is all the memory it costs).
`SpilledObservations` is an `Observations` whose attribute rows come from there.

The file lives in a temporary directory removed by `close()` (or when the object is
collected, or at exit)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from feedledger.formats.observations import Observations

BATCH_ROWS = 65_536


class SpilledRows:
    """String columns of a payload's records on disk, addressed by record index."""

    def __init__(self, directory: Path | None = None, batch_rows: int = BATCH_ROWS) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="feedledger-spill-", dir=directory))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        self.path = self._dir / "rows.arrow"
        self.batch_rows = batch_rows
        self.height = 0
        self._pending: list[pl.DataFrame] = []
        self._pending_rows = 0
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._reader: pa.ipc.RecordBatchFileReader | None = None
        self._schema: pl.Schema | None = None
        self._kept: pl.DataFrame | None = None  # `keep`: rows held in memory, with `idx`

    # -- writing ---------------------------------------------------------------------------
    def append(self, rows: pl.DataFrame) -> None:
        """Add the next records (same columns every time, all strings)."""
        if self._schema is None:
            self._schema = rows.schema
        self._pending.append(rows)
        self._pending_rows += rows.height
        while self._pending_rows >= self.batch_rows:
            self._flush(self.batch_rows)

    def finish(self) -> None:
        """Write what is left; the rows can be read from now on."""
        if self._pending_rows:
            self._flush(self._pending_rows)
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _flush(self, n: int) -> None:
        buffered = pl.concat(self._pending, how="vertical", rechunk=True)
        batch, rest = buffered.slice(0, n), buffered.slice(n)
        self._pending = [rest] if rest.height else []
        self._pending_rows = rest.height
        # one record batch of exactly n rows (the columns may come in chunks)
        table = batch.to_arrow(compat_level=pl.CompatLevel.newest()).combine_chunks()
        if self._writer is None:
            self._writer = pa.ipc.new_file(str(self.path), table.schema)
        self._writer.write_table(table, max_chunksize=n)
        self.height += n

    # -- reading ---------------------------------------------------------------------------
    def _batch(self, number: int) -> pl.DataFrame:
        if self._reader is None:
            # the system allocator: a batch's buffers go back to the system once polars
            # has its copy (Arrow's own pool would keep them, and the next batch's)
            pool = pa.system_memory_pool()
            self._reader = pa.ipc.open_file(
                pa.OSFile(str(self.path), memory_pool=pool), memory_pool=pool
            )
        batch = self._reader.get_batch(number)
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def keep(self, idx: pl.Series) -> None:
        """Hold the rows of these record indexes in memory from now on (one pass over the
        file), for a caller that will ask for them in many small pieces."""
        wanted = idx.drop_nulls().unique().sort()
        self._kept = None
        self._kept = self.rows(wanted).with_columns(wanted.cast(pl.Int64).alias("__idx"))

    def rows(self, idx: pl.Series) -> pl.DataFrame:
        """The rows at these record indexes (no null), in that order."""
        kept = self._kept
        if kept is not None:
            asked = pl.DataFrame({"__idx": idx.cast(pl.Int64)})
            if not asked.join(kept.select("__idx"), on="__idx", how="anti").height:
                return asked.join(kept, on="__idx", how="left", maintain_order="left").drop("__idx")
        if not idx.len():
            return pl.DataFrame(schema=self._schema)
        whole = self._whole_batch(idx)
        if whole is not None:
            return self._batch(whole)
        where = pl.DataFrame({"idx": idx.cast(pl.Int64)}).with_columns(
            pl.int_range(pl.len()).alias("pos"),
            (pl.col("idx") // self.batch_rows).alias("b"),
        )
        pieces = []
        for (number,), part in where.group_by("b", maintain_order=False):
            local = part.get_column("idx") - int(number) * self.batch_rows
            piece = _owned(self._batch(int(number))[local])
            pieces.append(piece.with_columns(part.get_column("pos")))
        return pl.concat(pieces, how="vertical").sort("pos").drop("pos")

    def _whole_batch(self, idx: pl.Series) -> int | None:
        """The number of the record batch `idx` asks for whole and in order (a first
        load's chunk in key order: `bounded.chunk_rows` makes them whole batches), whose
        rows are then the batch as read, with no gather or copy; else None."""
        n, size = idx.len(), self.batch_rows
        first = idx[0]
        if first is None or first % size or n != min(size, self.height - first):
            return None
        if idx.null_count() or idx[-1] != first + n - 1 or not (idx.diff().drop_nulls() == 1).all():
            return None
        return int(first) // size

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._reader = None
        self._kept = None
        self._cleanup()


def _owned(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` (a few rows gathered from a record batch) with strings of their own: a
    gathered string (view) column still refers to the whole batch's text buffers, which
    would keep every batch read alive as long as its few rows (the whole file's texts,
    when a spread sample or a key-sorted chunk touches every batch)."""
    strings = [name for name, dtype in rows.schema.items() if dtype == pl.String]
    if not strings:
        return rows
    table = rows.to_arrow(compat_level=pl.CompatLevel.newest())
    types = {name: pa.large_string() for name in strings}
    table = table.cast(
        pa.schema([pa.field(f.name, types.get(f.name, f.type)) for f in table.schema])
    )
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


@dataclass
class SpilledObservations(Observations):
    """Observations whose string columns are on disk (`spilled`); `raw` holds the key
    columns only (the readers' key checks use them)."""

    spilled: SpilledRows | None = None

    @property
    def on_disk(self) -> bool:
        return True

    def _rows(self, idx: pl.Series) -> pl.DataFrame:
        assert self.spilled is not None
        return self.spilled.rows(idx)

    def keep_rows(self, idx: pl.Series, limit: int) -> None:
        """Hold these records' rows in memory (one pass over the file) when they are at
        most `limit` records: a daily payload's few changed rows, asked for a chunk at a
        time by the transaction, then cost one read instead of one per chunk."""
        if self.spilled is not None and idx.drop_nulls().n_unique() <= limit:
            self.spilled.keep(idx)

    def close(self) -> None:
        if self.spilled is not None:
            self.spilled.close()
