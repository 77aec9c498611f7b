"""`Ledger.source(name)`: one declared source -- its runs (ingest, run, backfill,
replay), queries (history, asof, snapshot, gaps, watermark), freezes and archive.

Times are typed: a `date` is 00:00 of that day in the source's timezone, an aware
`datetime` that instant, a naive one a wall-clock time in the source's timezone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.reports import (
    Assessment,
    FreezeState,
    NothingToDo,
    NotModified,
    Payload,
    Recovered,
    Verification,
    WindowRun,
)
from feedledger.api.results import AsOf, Gap, Ingested, SnapshotGap, Version, Watermark
from feedledger.api.times import When, instant_us, opt_instant_us
from feedledger.api.windows import (
    OnPlan,
    OnProgress,
    OnReplayPlan,
    day_arg,
    run_backfill,
    run_replay,
)
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import check_not_future, now_us

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from feedledger.api.archive import PayloadFiles
    from feedledger.api.ledger import Ledger
    from feedledger.context import Context

Key = str | int | list[Any] | tuple[Any, ...]
RunResult = Ingested | Recovered | NothingToDo | NotModified
BATCH_ROWS = 65_536


def _key_text(key: Key) -> str:
    """A key as the CLI takes it: a single value, or a JSON array for a compound key."""
    import json

    if isinstance(key, list | tuple):
        return json.dumps(list(key), ensure_ascii=False)
    return str(key)


def _content_type(name: str) -> str | None:
    import mimetypes

    known = {".jsonl": "application/x-ndjson", ".parquet": "application/vnd.apache.parquet"}
    return known.get(Path(name).suffix.lower()) or mimetypes.guess_type(name)[0]


def _read(path: Path) -> bytes:
    from feedledger.model.errors import NotFoundError

    try:
        return path.read_bytes()
    except OSError as exc:
        raise NotFoundError(f"cannot read {path}: {exc.strerror}") from None


def ingest_payload(
    ctx: Context,
    source: str,
    payload: str | os.PathLike[str] | bytes,
    *,
    published_at: int | str | None,
    name: str | None,
    content_type: str | None,
    allow_mass_delete: bool,
    allow_future: bool,
) -> Ingested:
    """`Source.ingest` and `Ledger.ingest` (by name: an unknown source's bytes are kept
    in the archive for inspection, as are a bad date's)."""
    from feedledger.pipeline.ingest import ingest

    if not isinstance(payload, bytes):
        name = name or Path(payload).name
    result = ingest(
        ctx,
        source,
        # a file's bytes are bound to no name here, so that ingest can free them once
        # they are archived and parsed (a large payload's copy is not held to the end)
        payload if isinstance(payload, bytes) else _read(Path(payload)),
        published_at=published_at,
        original_name=name,
        content_type=content_type or (_content_type(name) if name else None),
        allow_mass_delete=allow_mass_delete,
        allow_future=allow_future,
    )
    return Ingested.of(result)


def check_export(format: str, output: str | os.PathLike[str] | None) -> None:
    """What `Source.export_snapshot` refuses before anything is read: a format other
    than csv or jsonl, an output path that cannot be a file (ConfigError)."""
    from feedledger.model.errors import ConfigError
    from feedledger.pipeline import snapshot_export

    if format not in ("csv", "jsonl"):
        raise ConfigError(f"--format must be csv or jsonl, not {format!r}")
    if output is not None:
        snapshot_export.check_output(Path(output))


class Source:
    def __init__(self, ledger: Ledger, config: SourceConfig) -> None:
        self.ledger = ledger
        self.config = config
        self.name = config.name

    def __repr__(self) -> str:
        return f"Source({self.name!r})"

    @property
    def _ctx(self) -> Any:
        return self.ledger.context

    def _us(self, value: When, what: str) -> int:
        return instant_us(value, self.config.timezone, what)

    def _opt_us(self, value: When | None, what: str) -> int | None:
        return opt_instant_us(value, self.config.timezone, what)

    # -- runs ---------------------------------------------------------------------------
    def _published(self, published_at: When | str | None, allow_future: bool) -> int | str | None:
        if published_at is None:
            return None  # from the file name or a field, as the source declares
        if isinstance(published_at, str):
            # text as typed (`--published-at`): parsed below with the payload at hand, so
            # a bad value is refused naming source and payload, the bytes kept
            return published_at
        value = self._us(published_at, "published_at")
        check_not_future(value, now_us(), what="published_at", allow_future=allow_future)
        return value

    def ingest(
        self,
        payload: str | os.PathLike[str] | bytes,
        *,
        published_at: When | str | None = None,
        name: str | None = None,
        content_type: str | None = None,
        allow_mass_delete: bool = False,
        allow_future: bool = False,
    ) -> Ingested:
        """Archive a payload (a file path, or bytes) and apply it as a live run.
        `published_at` may also be text as the CLI takes it (YYYY-MM-DD: 00:00 in the
        source's timezone, or ISO-8601); unparseable text is refused like bad bytes."""
        return ingest_payload(
            self._ctx,
            self.name,
            payload,
            published_at=self._published(published_at, allow_future),
            name=name,
            content_type=content_type,
            allow_mass_delete=allow_mass_delete,
            allow_future=allow_future,
        )

    def run(self, *, allow_mass_delete: bool = False, recover: bool = True) -> RunResult:
        """Fetch from the source's location and apply what is waiting (the CLI's `run`):
        one publication -> a live run; several -> one backfill of all (Recovered)."""
        from feedledger.pipeline.recovery import Recovery
        from feedledger.pipeline.run import NothingNew, run_source

        result = run_source(
            self._ctx, self.name, allow_mass_delete=allow_mass_delete, recover=recover
        )
        if result is None:
            return NotModified(self.name)
        if isinstance(result, NothingNew):
            return NothingToDo(result.source, result.reason, None, result)
        if isinstance(result, Recovery):
            assert result.report is not None
            return Recovered(
                result.source, list(result.days), len(result.archived), WindowRun.of(result.report)
            )
        return Ingested.of(result)

    def backfill(
        self,
        start: When | str,
        end: When | str,
        *,
        notify: bool = False,
        fetch: bool = True,
        allow_mass_delete: bool = False,
        on_plan: OnPlan | None = None,
        progress: OnProgress | None = None,
    ) -> WindowRun | NothingToDo:
        """Apply every archived payload of [start, end] after the watermark, oldest
        first, each at its own publisher date, as ONE run (gaps for missing days).
        `on_plan` hears the window's assessment first; `progress` each payload applied."""
        return run_backfill(
            self._ctx,
            self.name,
            start,
            end,
            notify=notify,
            fetch=fetch,
            allow_mass_delete=allow_mass_delete,
            on_plan=on_plan,
            progress=progress,
        )

    def replay(
        self,
        start: When | str,
        *,
        notify: bool = False,
        allow_mass_delete: bool = False,
        on_plan: OnReplayPlan | None = None,
        progress: OnProgress | None = None,
    ) -> WindowRun | NothingToDo:
        """Retract the versions valid from `start` on and re-apply the archive from it.
        `on_plan` hears the payloads to apply and the days without one first."""
        return run_replay(
            self._ctx,
            self.name,
            start,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            on_plan=on_plan,
            progress=progress,
        )

    def assess(self, start: When | str, end: When | str, *, fetch: bool = True) -> Assessment:
        """What a backfill of [start, end] would apply, and what is missing."""
        from feedledger.pipeline.assess import assess

        lo = day_arg(self._ctx, self.name, start, "start")
        hi = day_arg(self._ctx, self.name, end, "end")
        return Assessment.of(assess(self._ctx, self.name, lo, hi, fetch=fetch))

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

    def verify(self) -> Verification:
        from feedledger.pipeline.verify import verify

        r = verify(self._ctx, self.name)
        return Verification(r["source"], r["ok"], r["entities"], r["live"], r["checks"], r)

    # -- freezes ------------------------------------------------------------------------
    def freeze(self, reason: str | None = None) -> FreezeState:
        from feedledger.api.times import opt_dt
        from feedledger.pipeline.manual import freeze

        ice, new = freeze(self._ctx, self.name, reason)
        return FreezeState(self.name, True, new, opt_dt(ice.frozen_at), ice.reason)

    def thaw(self) -> FreezeState:
        from feedledger.pipeline.manual import thaw

        return FreezeState(self.name, False, thaw(self._ctx, self.name))

    # -- archive ------------------------------------------------------------------------
    def archive_add(
        self,
        payload: str | os.PathLike[str] | bytes,
        *,
        published_at: When | str | None = None,
        name: str | None = None,
        allow_future: bool = False,
    ) -> Payload:
        """Archive a payload without applying it (a later backfill applies it);
        `published_at` as in `ingest` (text as the CLI takes it too)."""
        from feedledger.pipeline.archiving import archive_add

        if not isinstance(payload, bytes):
            name = name or Path(payload).name
        ref, created = archive_add(
            self._ctx,
            self.name,
            payload if isinstance(payload, bytes) else _read(Path(payload)),
            published_at=self._published(published_at, allow_future),
            original_name=name,
            content_type=_content_type(name) if name else None,
            allow_future=allow_future,
        )
        return Payload.of(ref, created)

    def payload_files(
        self, paths: list[str | os.PathLike[str]], *, published_at: str | None = None
    ) -> PayloadFiles:
        """The files an `archive add` of `paths` would archive (folders expanded to their
        dated payload files); refused before anything is archived if one is undated, or
        if `published_at` is given for more than one file."""
        from feedledger.api.archive import payload_files

        return payload_files(self._ctx, self.name, paths, published_at=published_at)

    def archive_list(
        self, *, start: When | None = None, end: date | datetime | None = None
    ) -> list[Payload]:
        """Archived payloads in publisher order, published in [start, end] (a date `end`
        includes its whole day)."""
        from datetime import timedelta

        lo = self._opt_us(start, "start")
        hi: int | None = None
        if isinstance(end, datetime):
            hi = self._us(end, "end")
        elif end is not None:
            hi = self._us(end + timedelta(days=1), "end") - 1
        refs = self._ctx.store.list_payloads(self.name, lo, hi)
        return [Payload.of(r) for r in refs]
