"""A source's first export streamed: its rows built chunk by chunk from key-ordered
reads (`history_rows.versions_by_key`: every version of a key in one chunk, so each
chunk's `valid_to` is complete) and handed to delta-rs as one RecordBatchReader, written
as ONE Delta commit -- in memory a chunk at a time, not the whole history.

The reader's schema is the first chunk's: a later chunk's column the first lacks is
added as nulls, its attributes are typed as the first's were (`known_types`). A later
chunk that cannot take that schema -- a column the first chunk never had, an integer
column meeting a decimal -- stops the stream (`Unstreamable`): no commit was made, and
the export builds the rows in memory instead, typed all at once (`lake/export.py`).
A kill during the stream leaves only files no commit names (invisible; `vacuum`
removes them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from feedledger.lake.rows import changed, delta_rows, geo_note, with_geo_note
from feedledger.ledger.readers import history_rows
from feedledger.model.errors import ConfigError

__all__ = ["FirstExport", "Unstreamable"]

Tell = Callable[[str, str, int, int], None]


class Unstreamable(Exception):
    """A chunk does not fit the stream's schema: build the rows in memory instead."""


@dataclass
class FirstExport:
    """One source's first export as a stream of Delta rows."""

    ctx: Any
    src: Any
    known: int
    fields: list[str]
    geo_crs: dict[str, Any] | None  # PROJJSON of a GIS source's CRS
    tell: Tell
    table_types: dict[str, pa.DataType] = field(default_factory=dict)  # the table's columns
    chunk_rows: int | None = None  # default history_rows.BATCH_ROWS
    rows: int = 0  # written so far
    failed: BaseException | None = field(default=None, repr=False)

    def _chunks(self) -> Iterator[pa.Table]:
        from feedledger import faults  # lazy: crash points of the kill tests

        name = self.src.name
        known_types = dict(self.table_types)
        read = 0
        for batch in history_rows.versions_by_key(
            self.ctx.store, name, self.known, rows=self.chunk_rows or history_rows.BATCH_ROWS
        ):
            versions = pa.Table.from_batches([batch])
            read += versions.num_rows
            self.tell(name, "read", read, 0)
            rows = delta_rows(
                name, changed(versions, None), self.fields, geo=self.src.is_geo,
                known_types=known_types,
            )  # fmt: skip
            for f in rows.schema:
                known_types.setdefault(f.name, f.type)
            yield rows
            faults.point("delta_stream_chunk")

    def reader(self) -> pa.RecordBatchReader | None:
        """The rows as a RecordBatchReader (None: the source has no version)."""
        chunks = self._chunks()
        first = next(chunks, None)
        if first is None:
            return None
        if self.src.is_geo:
            first = with_geo_note(first, geo_note(self.geo_crs))
        schema = first.schema

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                yield from self._fitted(first, schema)
                for chunk in chunks:
                    yield from self._fitted(chunk, schema)
            except BaseException as exc:  # delta-rs sees a failed stream: no commit
                self.failed = exc
                raise

        return pa.RecordBatchReader.from_batches(schema, batches())

    def _fitted(self, chunk: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        extra = [n for n in chunk.column_names if schema.get_field_index(n) < 0]
        if extra:
            raise Unstreamable(f"column {extra[0]!r} first seen after the first chunk")
        cols = []
        for f in schema:
            if f.name in chunk.column_names:
                try:
                    cols.append(chunk.column(f.name).cast(f.type))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise Unstreamable(f"column {f.name!r}: {exc}") from exc
            else:
                cols.append(pa.nulls(chunk.num_rows, f.type))
        self.rows += chunk.num_rows
        yield from pa.Table.from_arrays(cols, schema=schema).to_batches()

    def refused(self) -> bool:
        """Whether the stream stopped because a chunk did not fit (build in memory)."""
        return isinstance(self.failed, Unstreamable | ConfigError)
