"""A source's diff state written in key-hash partitions, and read back a partition at a
time: the state cache's file format for a state made in parts (a source under a
`memory_budget`, pipeline/intake/bounded.py).

The file is one Arrow IPC file of the state's schema (diff.STATE_SCHEMA) whose record
batches are the partitions in order -- batch p holds exactly the keys whose key hash
modulo `partitions` is p (diff/partitioned.partition_of) -- and whose schema metadata
records `partitions`. A reader under a budget then reads the batch it needs
(`StoredState.read`, into memory of its own, freed when dropped) instead of mapping the
whole file and touching every page of it (a 10M-key state: ~600-740 MiB of file pages
resident through a next day's diff, bench/README.md, "10M under a 1 GiB budget").
A file without the metadata (a state written whole) is read whole, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from feedledger.diff import STATE_SCHEMA, empty_state

PARTITIONS_KEY = b"feedledger.partitions"


@dataclass
class StateParts:
    """A state given as its `partitions` key-hash parts, in partition order, made one at
    a time as they are written (`parts`, a generator: consumed once)."""

    parts: Iterable[pl.DataFrame]
    partitions: int

    def __iter__(self) -> Iterator[pl.DataFrame]:
        return iter(self.parts)


def _arrow_schema(partitions: int | None) -> pa.Schema:
    schema = empty_state().to_arrow(compat_level=pl.CompatLevel.newest()).schema
    schema = pa.schema([_viewed(f) for f in schema])
    if partitions is None:
        return schema
    return schema.with_metadata({PARTITIONS_KEY: str(partitions).encode()})


def _viewed(f: pa.Field) -> pa.Field:
    return pa.field(f.name, pa.string_view()) if pa.types.is_large_string(f.type) else f


def write_parts(path: Path, parts: Iterable[pl.DataFrame]) -> None:
    """The parts, one after the other, as one Arrow IPC file of the state's schema; for
    `StateParts`, each part one record batch (an empty one too) and the partition count
    in the schema's metadata, so that `open_stored` can read it a partition at a time."""
    partitions = parts.partitions if isinstance(parts, StateParts) else None
    schema = _arrow_schema(partitions)
    with pa.ipc.new_file(str(path), schema) as writer:
        for part in parts:
            table = _compact(part.select(list(STATE_SCHEMA)).cast(STATE_SCHEMA)).cast(schema)
            if partitions is None:
                writer.write_table(table)
                continue
            batches = table.combine_chunks().to_batches()
            writer.write_batch(batches[0] if batches else _empty_batch(schema))


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _compact(frame: pl.DataFrame) -> pa.Table:
    """`frame` as Arrow with its string columns' texts of their own: a part made by
    filtering a larger frame holds string views into the whole frame's text buffers,
    which Arrow would write whole with every part (a 3M-key state written in 8 parts:
    457 MB where its texts are ~45 MB). Copied out as plain strings, then viewed."""
    table = frame.to_arrow(compat_level=pl.CompatLevel.oldest())
    return table.cast(pa.schema([_viewed(f) for f in table.schema]))


class StoredState:
    """A state cache file written in partitions, read a partition at a time."""

    def __init__(self, reader: pa.ipc.RecordBatchFileReader, partitions: int) -> None:
        self._reader = reader
        self.partitions = partitions

    def read(self, p: int) -> pl.DataFrame:
        """Partition `p`'s rows (the state's schema), in memory of their own."""
        frame = pl.from_arrow(self._reader.get_batch(p), rechunk=False)
        assert isinstance(frame, pl.DataFrame)
        return frame.cast(STATE_SCHEMA)


def open_stored(path: Path) -> StoredState | None:
    """The file at `path` as a `StoredState`, or None: not there, unreadable, not of
    the state's schema, or not written in partitions (read it whole instead)."""
    try:
        # the system allocator: a partition's buffers go back to the system once
        # dropped (Arrow's own pool would keep them for the next)
        pool = pa.system_memory_pool()
        reader = pa.ipc.open_file(pa.OSFile(str(path), memory_pool=pool), memory_pool=pool)
    except (OSError, pa.ArrowException):
        return None
    meta = reader.schema.metadata or {}
    try:
        partitions = int(meta.get(PARTITIONS_KEY, b"0"))
    except ValueError:
        return None
    expected = _arrow_schema(None)
    if partitions < 1 or reader.num_record_batches != partitions:
        return None
    if not reader.schema.remove_metadata().equals(expected):
        return None
    return StoredState(reader, partitions)
