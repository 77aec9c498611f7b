"""The queries of one declared source (`Source` inherits them): history, as-of,
snapshots (frames, Arrow batches, streamed CSV/JSONL export, the gap a valid time falls
in), gaps and the watermark."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.results import AsOf, Gap, SnapshotGap, Version, Watermark
from feedledger.api.times import When, instant_us, opt_instant_us
from feedledger.api.windows import day_arg
from feedledger.model.source import SourceConfig

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from feedledger.api.ledger import Ledger

Key = str | int | list[Any] | tuple[Any, ...]
BATCH_ROWS = 65_536


def _key_text(key: Key) -> str:
    """A key as the CLI takes it: a single value, or a JSON array for a compound key."""
    import json

    if isinstance(key, list | tuple):
        return json.dumps(list(key), ensure_ascii=False)
    return str(key)


def check_export(
    format: str, output: str | os.PathLike[str] | None, *, geo: bool | None = None
) -> None:
    """What `Source.export_snapshot` refuses before anything is read (ConfigError): a
    format other than csv, jsonl, geojson, geoparquet or gpkg; a GIS format of a
    source without geometry (`geo` False; None: not known yet); geoparquet or gpkg to
    stdout (`output` None); an output path that cannot be a file."""
    from feedledger.pipeline.exports import snapshot as snapshot_export

    path = Path(output) if output is not None else None
    snapshot_export.check_format(format, path, geo=geo)
    if path is not None:
        snapshot_export.check_output(path)


def _joined(held: list[pa.RecordBatch]) -> pa.RecordBatch:
    import pyarrow as pa

    if len(held) == 1:
        return held[0]
    return pa.Table.from_batches(held).combine_chunks().to_batches()[0]


class SourceQueries:
    ledger: Ledger
    config: SourceConfig
    name: str

    @property
    def _ctx(self) -> Any:
        return self.ledger.context

    def _us(self, value: When, what: str) -> int:
        return instant_us(value, self.config.timezone, what)

    def _opt_us(self, value: When | None, what: str) -> int | None:
        return opt_instant_us(value, self.config.timezone, what)

    # -- queries ------------------------------------------------------------------------
    def history(
        self, key: Key, *, known_at: When | None = None, include_retracted: bool = False
    ) -> list[Version]:
        """Versions of one entity in valid-time order."""
        from feedledger.pipeline import query

        found = query.history(
            self._ctx,
            self.name,
            _key_text(key),
            include_retracted=include_retracted,
            known_at=self._opt_us(known_at, "known_at"),
        )
        return [Version.of(v) for v in found]

    def history_frame(
        self,
        key: Key | None = None,
        *,
        keys: Sequence[Key] | None = None,
        known_at: When | None = None,
        include_retracted: bool = False,
    ) -> pl.DataFrame:
        """The versions of `key` (or of each of `keys`, key by key in the order given) as
        one polars DataFrame with typed columns: `key`, `valid_from`, `valid_to`,
        `recorded_at`, `retracted_at` (Datetime UTC), `run_id`, `payload_id`,
        `backfill`, `deleted`, `change`, `revision`, one String column per attribute
        (values as the snapshot writes them) and for a GIS source `geometry` (WKB);
        see `feedledger.api.history_frame`. A key never recorded: NotFoundError, as
        `history`."""
        from feedledger.api.history_frame import frame
        from feedledger.model.errors import ConfigError

        if (key is None) == (keys is None):
            raise ConfigError("history_frame: give one key, or keys=[...]", source=self.name)
        if keys is not None and (isinstance(keys, str | bytes) or not isinstance(keys, Iterable)):
            # a text is iterable too: keys="0714-22-1" would read the keys "0", "7"...
            raise TypeError(
                f"history_frame: keys must be a list of keys (keys=[...]), "
                f"not {type(keys).__name__} {keys!r}; one key is history_frame(key)"
            )
        found: list[Version] = []
        for one in [key] if keys is None else list(keys):
            assert one is not None
            found += self.history(one, known_at=known_at, include_retracted=include_retracted)
        return frame(found, self.config.key, geo=self.config.is_geo)

    def history_with_gaps(
        self, key: Key, *, known_at: When | None = None, include_retracted: bool = False
    ) -> list[Version | Gap]:
        """The entity's versions and the source's standing gaps in one valid-time line
        (a version before a gap starting at the same instant)."""
        versions = self.history(key, known_at=known_at, include_retracted=include_retracted)
        gaps = self.gaps(known_at=known_at, include_retracted=include_retracted)
        items: list[tuple[datetime, int, Version | Gap]] = [(v.valid_from, 0, v) for v in versions]
        items += [(g.start, 1, g) for g in gaps]
        return [item for _t, _o, item in sorted(items, key=lambda x: (x[0], x[1]))]

    def asof(self, key: Key, *, valid: When, known_at: When | None = None) -> AsOf:
        """present / absent / not_observed (inside a gap) / not_known."""
        from feedledger.pipeline import query

        answer = query.asof(
            self._ctx,
            self.name,
            _key_text(key),
            valid=self._us(valid, "valid"),
            known_at=self._opt_us(known_at, "known_at"),
        )
        return AsOf.of(answer)

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
        valid_us = self._us(valid, "valid")
        known_us = self._opt_us(known_at, "known_at")
        self._gap_check(valid_us, known_us, strict)
        return self._snapshot_batches(valid_us, known_us, batch_rows)

    def _snapshot_batches(
        self, valid_us: int, known_us: int | None, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """The store's batches (`ledger.snapshot_rows.batches`, the one fast path every
        snapshot reads through) cut into batches of exactly `batch_rows` (the last
        fewer)."""
        from feedledger.pipeline.exports import snapshot as snapshot_export

        found = snapshot_export.batches(self._ctx, self.name, valid_us, known_us)
        held: list[pa.RecordBatch] = []
        size = 0
        for got in found:
            held.append(got)
            size += got.num_rows
            while size >= batch_rows:
                whole = _joined(held)
                yield whole.slice(0, batch_rows)
                rest = whole.slice(batch_rows)
                held, size = ([rest] if rest.num_rows else []), rest.num_rows
        if size:
            yield _joined(held)

    def snapshot(
        self, *, valid: When, known_at: When | None = None, strict: bool = False
    ) -> pl.DataFrame:
        """The source as it stood at `valid`: one row per live entity, the key fields
        and the record's fields as stated (text), as a polars DataFrame; a GIS source
        adds a `geometry` column (GeoJSON text, last). Columns in the source's field
        order (as the CSV export). Inside a standing gap: a `GapWarning` (the rows are
        the state as last observed), or with `strict` an `InGap` error."""
        import polars as pl
        import pyarrow as pa

        from feedledger.ledger.attribute_columns import UnknownField, fields_of, text_columns
        from feedledger.pipeline.exports import snapshot as snapshot_export

        valid_us = self._us(valid, "valid")
        known_us = self._opt_us(known_at, "known_at")
        self._gap_check(valid_us, known_us, strict)
        parts: list[pa.Table] = []
        for batch in snapshot_export.batches(self._ctx, self.name, valid_us, known_us):
            attributes = batch.column("attributes")
            names = fields_of(attributes[0].as_py())
            try:
                texts = text_columns(attributes, names)
            except UnknownField:  # entities with different fields: every one's
                names = sorted({n for t in attributes.to_pylist() for n in fields_of(t)})
                texts = text_columns(attributes, names)
            cols = dict(zip(names, texts, strict=True))
            if "geometry" in batch.schema.names:
                cols["geometry"] = batch.column("geometry")
            parts.append(pa.table(cols))
        if not parts:
            return pl.DataFrame()
        table = pa.concat_tables(parts, promote_options="default")
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        order = snapshot_export.column_order(self._ctx, self.name, valid_us, known_us)
        return frame.select(snapshot_export.ordered_columns(frame.columns, order))

    def snapshot_gap(self, *, valid: When, known_at: When | None = None) -> SnapshotGap | None:
        """The standing gap `valid` falls in (the source was not observed then), with
        its last and next observation around it; None outside every gap."""
        return self._snapshot_gap(self._us(valid, "valid"), self._opt_us(known_at, "known_at"))

    def _snapshot_gap(self, valid_us: int, known_us: int | None) -> SnapshotGap | None:
        from feedledger.api.times import opt_dt
        from feedledger.pipeline import query

        found = query.snapshot_gap(self._ctx, self.name, valid=valid_us, known_at=known_us)
        if found is None:
            return None
        return SnapshotGap(
            Gap.of(found["gap"]),
            opt_dt(found["last_observed_at"]),
            opt_dt(found["next_observed_at"]),
        )

    def _gap_check(self, valid_us: int, known_us: int | None, strict: bool) -> None:
        """A snapshot at `valid_us` inside a standing gap: `InGap` if `strict`, else a
        `GapWarning` (the rows are the state as last observed, not an observation)."""
        import warnings

        from feedledger.api.errors import GapWarning, InGap, gap_text
        from feedledger.model.timeutil import iso

        inside = self._snapshot_gap(valid_us, known_us)
        if inside is None:
            return
        text = gap_text(self.name, str(iso(valid_us)), inside)
        if strict:
            raise InGap(
                text + "; nothing read",
                inside,
                source=self.name,
                hint="strict=False to read the state as last observed",
            )
        warnings.warn(
            GapWarning(
                f"source {self.name!r}: {text}; the rows are the state as last observed", inside
            ),
            stacklevel=3,
        )

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
        from feedledger.pipeline.exports import snapshot as snapshot_export

        path = Path(output) if output is not None else None
        check_export(format, path, geo=self.config.is_geo)
        valid_us = self._us(valid, "valid")
        known_us = self._opt_us(known_at, "known_at")
        self._gap_check(valid_us, known_us, strict)
        return snapshot_export.export(self._ctx, self.name, path, format, valid_us, known_us)

    def gaps(self, *, known_at: When | None = None, include_retracted: bool = False) -> list[Gap]:
        from feedledger.pipeline import query

        found = query.list_gaps(
            self._ctx,
            self.name,
            include_retracted=include_retracted,
            known_at=self._opt_us(known_at, "known_at"),
        )
        return [Gap.of(g) for g in found]

    def add_gap(self, start: When | str, end: When | str, reason: str) -> Gap:
        """Record that the source was not observed from `start` to `end` (days, inclusive;
        text as the CLI takes it too)."""
        from feedledger.pipeline.manual import add_gap

        lo = day_arg(self._ctx, self.name, start, "start")
        hi = day_arg(self._ctx, self.name, end, "end")
        return Gap.of(add_gap(self._ctx, self.name, lo, hi, reason))

    def watermark(self) -> Watermark:
        from feedledger.api.times import opt_dt

        wm = self._ctx.store.watermark(self.name)
        if wm is None:
            return Watermark(self.name, None, None)
        return Watermark(self.name, opt_dt(wm.published_at), wm.payload_id)
