"""The queries of one declared source (`Source` inherits them): history, as-of,
snapshots (frames, Arrow batches, streamed CSV/JSONL export, the gap a valid time falls
in), gaps and the watermark."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


def check_export(format: str, output: str | os.PathLike[str] | None) -> None:
    """What `Source.export_snapshot` refuses before anything is read: a format other
    than csv or jsonl, an output path that cannot be a file (ConfigError)."""
    from feedledger.model.errors import ConfigError
    from feedledger.pipeline import snapshot_export

    if format not in ("csv", "jsonl"):
        raise ConfigError(f"--format must be csv or jsonl, not {format!r}")
    if output is not None:
        snapshot_export.check_output(Path(output))


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
        self, *, valid: When, known_at: When | None = None, batch_rows: int = BATCH_ROWS
    ) -> Iterator[pa.RecordBatch]:
        """The source as it stood at `valid`, streamed as Arrow batches of `key` and
        `attributes` (canonical JSON texts)."""
        import pyarrow as pa

        from feedledger.pipeline import query

        rows = query.snapshot_rows(
            self._ctx,
            self.name,
            valid=self._us(valid, "valid"),
            known_at=self._opt_us(known_at, "known_at"),
        )
        schema = pa.schema([("key", pa.string()), ("attributes", pa.string())])
        keys: list[str] = []
        attrs: list[str] = []
        for k, a in rows:
            keys.append(k)
            attrs.append(a)
            if len(keys) >= batch_rows:
                yield pa.record_batch([pa.array(keys), pa.array(attrs)], schema=schema)
                keys, attrs = [], []
        if keys:
            yield pa.record_batch([pa.array(keys), pa.array(attrs)], schema=schema)

    def snapshot(self, *, valid: When, known_at: When | None = None) -> pl.DataFrame:
        """The source as it stood at `valid`: one row per live entity, the key fields
        and the record's fields as stated (text), as a polars DataFrame."""
        import json

        import polars as pl

        records = [
            {**json.loads(a)}
            for batch in self.snapshot_batches(valid=valid, known_at=known_at)
            for a in batch.column("attributes").to_pylist()
        ]
        if not records:
            return pl.DataFrame()
        return pl.DataFrame(records, infer_schema_length=None)

    def snapshot_gap(self, *, valid: When, known_at: When | None = None) -> SnapshotGap | None:
        """The standing gap `valid` falls in (the source was not observed then), with
        its last and next observation around it; None outside every gap."""
        from feedledger.pipeline import query

        found = query.snapshot_gap(
            self._ctx,
            self.name,
            valid=self._us(valid, "valid"),
            known_at=self._opt_us(known_at, "known_at"),
        )
        if found is None:
            return None
        return SnapshotGap(
            Gap.of(found["gap"]), found["last_observed_at"], found["next_observed_at"]
        )

    def export_snapshot(
        self,
        output: str | os.PathLike[str] | None,
        *,
        valid: When,
        known_at: When | None = None,
        format: str = "csv",
    ) -> int:
        """Write the source as it stood at `valid` to `output` (stdout if None),
        streaming: CSV with columns in the source's field order, or JSON lines (`jsonl`);
        a file appears only when complete. Returns the number of entities written."""
        from feedledger.pipeline import query, snapshot_export

        path = Path(output) if output is not None else None
        check_export(format, path)
        valid_us = self._us(valid, "valid")
        known_us = self._opt_us(known_at, "known_at")
        order = (
            snapshot_export.field_order(self._ctx, self.name, valid=valid_us, known_at=known_us)
            if format == "csv"
            else []
        )
        rows = query.snapshot_rows(self._ctx, self.name, valid=valid_us, known_at=known_us)
        return snapshot_export.write(rows, format, path, order)

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
