"""The source as it stood at a valid time, `Source`'s snapshot methods (api/source.py):
Arrow batches, a polars frame, the gap a time falls in, and the exports (a file, or its
bytes streamed). The heavier work is `snapshots` and `snapshot_stream`'s."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.api import snapshot_stream
from feedledger.api._source import snapshots
from feedledger.api._source.base import SourceBase
from feedledger.api.results import SnapshotGap
from feedledger.api.times import When

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

BATCH_ROWS = 65_536


class SnapshotMethods(SourceBase):
    """`Source.snapshot*`, `check_export` and `export_snapshot`."""

    def snapshot_batches(
        self,
        *,
        valid: When,
        known_at: When | None = None,
        batch_rows: int = BATCH_ROWS,
        strict: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """The source as it stood at `valid`, streamed as Arrow batches of `key` and
        `attributes` (canonical JSON texts) and, for a GIS source, `geometry` (the
        GeoJSON text of the geometry as stated; null for a feature without one).
        Inside a standing gap: a `GapWarning` (the state as last observed), or with
        `strict` an `InGap` error, raised by this call, before any batch."""
        valid_us, known_us = self._us(valid, "valid"), self._opt_us(known_at, "known_at")
        snapshots.gap_check(self.context, self.name, valid_us, known_us, strict)
        return snapshots.cut_batches(self.context, self.name, valid_us, known_us, batch_rows)

    def snapshot(
        self, *, valid: When, known_at: When | None = None, strict: bool = False
    ) -> pl.DataFrame:
        """The source as it stood at `valid`: one row per live entity, the key fields
        and the record's fields as stated (text), as a polars DataFrame; a GIS source
        adds a `geometry` column (GeoJSON text, last). Columns in the source's field
        order (as the CSV export). Inside a standing gap: a `GapWarning` (the rows are
        the state as last observed), or with `strict` an `InGap` error."""
        valid_us, known_us = self._us(valid, "valid"), self._opt_us(known_at, "known_at")
        snapshots.gap_check(self.context, self.name, valid_us, known_us, strict)
        return snapshots.frame(self.context, self.name, valid_us, known_us)

    def snapshot_gap(self, *, valid: When, known_at: When | None = None) -> SnapshotGap | None:
        """The standing gap `valid` falls in (the source was not observed then), with
        its last and next observation around it; None outside every gap."""
        valid_us, known_us = self._us(valid, "valid"), self._opt_us(known_at, "known_at")
        return snapshots.snapshot_gap(self.context, self.name, valid_us, known_us)

    @staticmethod
    def check_export(
        format: str, output: str | os.PathLike[str] | None, *, geo: bool | None = None
    ) -> None:
        """What `export_snapshot` refuses before anything is read (ConfigError), checked
        before a ledger is opened (the CLI's `snapshot`): a format other than csv,
        jsonl, geojson, geoparquet or gpkg; a GIS format of a source without geometry
        (`geo` False; None: not known yet); geoparquet or gpkg to stdout (`output`
        None); an output path that cannot be a file."""
        snapshots.check_export(format, output, geo=geo)

    def export_snapshot(
        self,
        output: str | os.PathLike[str] | None,
        *,
        valid: When,
        known_at: When | None = None,
        format: str = "csv",
        strict: bool = False,
    ) -> int:
        """Write the source as it stood at `valid` to `output` (stdout if None),
        streaming: CSV with columns in the source's field order, JSON lines (`jsonl`),
        or for a GIS source `geojson`, `geoparquet` or `gpkg` (a file, not stdout);
        a file appears only when complete. Returns the number of entities written.
        Inside a standing gap: a `GapWarning`, or with `strict` an `InGap` error
        (nothing written)."""
        from feedledger.pipeline.exports import (
            snapshot as snapshot_export,  # lazy: SQLAlchemy, Arrow
        )

        path = Path(output) if output is not None else None
        snapshots.check_export(format, path, geo=self.config.is_geo)
        valid_us, known_us = self._us(valid, "valid"), self._opt_us(known_at, "known_at")
        snapshots.gap_check(self.context, self.name, valid_us, known_us, strict)
        return snapshot_export.export(self.context, self.name, path, format, valid_us, known_us)

    def snapshot_bytes(
        self, *, valid: When, known_at: When | None = None, format: str = "csv"
    ) -> Generator[bytes, None, None]:
        """The bytes of `export_snapshot(None, valid=, known_at=, format=)` in chunks,
        memory bounded whatever the size (the HTTP API's streamed `/snapshot`). A
        refused format (ConfigError) or a bad time is raised here, before any chunk; an
        error while streaming ends the stream early (raised from the iterator)."""
        snapshots.check_export(format, None, geo=self.config.is_geo)
        valid_us, known_us = self._us(valid, "valid"), self._opt_us(known_at, "known_at")
        return snapshot_stream.stream(
            self.context, self.name, self.config.format, format, valid_us, known_us
        )

    def snapshot_chunks(
        self, *, valid: When, known_at: When | None = None, format: str = "csv"
    ) -> Iterator[str]:
        """The text of `export_snapshot(None, valid=, known_at=, format=)` in chunks
        (`snapshot_bytes`, decoded)."""
        chunks = self.snapshot_bytes(valid=valid, known_at=known_at, format=format)
        return snapshot_stream.decoded(chunks)
