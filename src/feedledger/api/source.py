"""`Ledger.source(name)`: one declared source -- its runs (ingest, run, backfill,
replay), queries (history, asof, snapshot, gaps, watermark), freezes, archive and
publication calendar.

Times are typed: a `date` is 00:00 of that day in the source's timezone, an aware
`datetime` that instant, a naive one a wall-clock time in the source's timezone."""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api import archive, snapshot_stream
from feedledger.api import calendar as calendars
from feedledger.api._source import history_frame, payloads, snapshots
from feedledger.api.archive import PayloadFiles, Rejected
from feedledger.api.calendar import Calendar
from feedledger.api.features import Layer
from feedledger.api.results import (
    AsOf,
    Assessment,
    FreezeState,
    Gap,
    Ingested,
    NothingToDo,
    NotModified,
    Payload,
    Publication,
    Recovered,
    Run,
    SnapshotGap,
    Verification,
    Version,
    Watermark,
    WindowRun,
)
from feedledger.api.times import When, day, instant_us, opt_dt, opt_instant_us
from feedledger.api.windows import (
    OnPlan,
    OnProgress,
    OnReplayPlan,
    plan_relay,
    progress_relay,
    replay_plan_relay,
    window_result,
)
from feedledger.context import Context
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import check_not_future, now_us

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

RunResult = Ingested | Recovered | NothingToDo | NotModified
Key = str | int | list[Any] | tuple[Any, ...]
BATCH_ROWS = 65_536


def _key_text(key: Key) -> str:
    """A key as the CLI takes it: a single value, or a JSON array for a compound key."""
    if isinstance(key, list | tuple):
        return json.dumps(list(key), ensure_ascii=False)
    return str(key)


class Source:
    """One source of the workspace `context`: its runs, queries, freezes, archive.

    `led.source(name)` is a declared one; `led.source(name, require_declared=False)` may
    name one that is not (yet, or any more): its `ingest` keeps the refused bytes for
    inspection, its `rejected_payloads` reads the archive alone, and what needs the
    declaration raises SourceNotFound."""

    def __init__(self, context: Context, name: str, config: SourceConfig | None = None) -> None:
        self.context = context
        self.name = name
        self._config = config

    def __repr__(self) -> str:
        return f"Source({self.name!r})"

    @property
    def config(self) -> SourceConfig:
        """The declaration (SourceNotFound for a name the workspace does not declare)."""
        if self._config is not None:
            return self._config
        return self.context.workspace.source(self.name)

    def _us(self, value: When, what: str) -> int:
        return instant_us(value, self.config.timezone, what)

    def _opt_us(self, value: When | None, what: str) -> int | None:
        return opt_instant_us(value, self.config.timezone, what)

    def _day(self, value: When | str, what: str) -> date | str:
        """A window bound for the pipeline: text as typed (parsed there, in the source's
        timezone), a date as it is, an instant's date in the source's timezone."""
        if isinstance(value, datetime):
            return day(value, self.config.timezone, what)
        return value

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

    # -- runs ---------------------------------------------------------------------------
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
        return payloads.ingest(
            self.context,
            self.name,
            payload,
            published_at=self._published(published_at, allow_future),
            name=name,
            content_type_=content_type,
            allow_mass_delete=allow_mass_delete,
            allow_future=allow_future,
        )

    def run(
        self,
        *,
        allow_mass_delete: bool = False,
        recover: bool = True,
        allow_future: bool = False,
        accept_restored: bool = False,
    ) -> RunResult:
        """Fetch from the source's location and apply what is waiting (the CLI's `run`):
        one publication -> a live run; several -> one backfill of all (Recovered).
        A publisher date more than a day ahead is refused unless `allow_future`; one
        gone back before the watermark with other content is refused (exit 6, archived)
        unless `accept_restored` applies it as a correction dated now."""
        from feedledger.pipeline.run import run_source  # lazy: a snapshot loads no payload reader

        result = run_source(
            self.context,
            self.name,
            allow_mass_delete=allow_mass_delete,
            recover=recover,
            allow_future=allow_future,
            accept_restored=accept_restored,
        )
        return payloads.run_result(self.name, result)

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
        from feedledger.pipeline.catchup.backfill import backfill  # lazy: SQLAlchemy, Arrow

        report = backfill(
            self.context,
            self.name,
            self._day(start, "start"),
            self._day(end, "end"),
            notify=notify,
            fetch=fetch,
            allow_mass_delete=allow_mass_delete,
            on_plan=plan_relay(on_plan),
            progress=progress_relay(progress),
        )
        return window_result(report)

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
        from feedledger.pipeline.catchup.backfill import replay  # lazy: SQLAlchemy, Arrow

        report = replay(
            self.context,
            self.name,
            self._day(start, "start"),
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            on_plan=replay_plan_relay(on_plan),
            progress=progress_relay(progress),
        )
        return window_result(report)

    def assess(self, start: When | str, end: When | str, *, fetch: bool = True) -> Assessment:
        """What a backfill of [start, end] would apply, and what is missing."""
        from feedledger.pipeline.catchup.assess import assess  # lazy: SQLAlchemy, Arrow

        lo, hi = self._day(start, "start"), self._day(end, "end")
        return Assessment.of(assess(self.context, self.name, lo, hi, fetch=fetch))

    def peek(self) -> Publication:
        """The newest publication as the publisher states it now (its date and a version
        that changes exactly when it does), asked as cheaply as the location allows;
        nothing is archived or applied (an orchestrator's observation)."""
        from feedledger.pipeline.peek import peek  # lazy: the fetchers load httpx

        return Publication.of(peek(self.config))

    def verify(self) -> Verification:
        from feedledger.pipeline.verify import verify  # lazy: SQLAlchemy, Arrow

        return Verification.of(verify(self.context, self.name))

    def runs(self) -> list[Run]:
        """The source's runs, oldest first."""
        from feedledger.ledger.runs import list_runs  # lazy: SQLAlchemy, Arrow

        self.config  # noqa: B018 -- SourceNotFound for an undeclared name, as before
        return [Run.of(r) for r in list_runs(self.context.store, self.name)]

    # -- freezes ------------------------------------------------------------------------
    def freeze(self, reason: str | None = None) -> FreezeState:
        from feedledger.pipeline.manual import freeze  # lazy: SQLAlchemy, Arrow

        ice, new = freeze(self.context, self.name, reason)
        return FreezeState(self.name, True, new, opt_dt(ice.frozen_at), ice.reason)

    def thaw(self) -> FreezeState:
        from feedledger.pipeline.manual import thaw  # lazy: SQLAlchemy, Arrow

        return FreezeState(self.name, False, thaw(self.context, self.name))

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
        when = self._published(published_at, allow_future)
        return payloads.archive(self.context, self.name, payload, when, name, allow_future)

    def payload_files(
        self, paths: list[str | os.PathLike[str]], *, published_at: str | None = None
    ) -> PayloadFiles:
        """The files an `archive add` of `paths` would archive (folders expanded to their
        dated payload files); refused before anything is archived if one is undated, or
        if `published_at` is given for more than one file."""
        return archive.payload_files(self.context, self.name, paths, published_at=published_at)

    def archive_list(
        self, *, start: When | None = None, end: date | datetime | None = None
    ) -> list[Payload]:
        """Archived payloads in publisher order, published in [start, end] (a date `end`
        includes its whole day)."""
        lo = self._opt_us(start, "start")
        hi: int | None = None
        if isinstance(end, datetime):
            hi = self._us(end, "end")
        elif end is not None:
            hi = self._us(end + timedelta(days=1), "end") - 1
        refs = self.context.store.list_payloads(self.name, lo, hi)
        return [Payload.of(r) for r in refs]

    def rejected_payloads(self) -> list[Rejected]:
        """Refused payloads kept for inspection (`archive list --rejected`), read from the
        archive alone (the store is not opened; bytes sent under a name the workspace
        does not declare are listed under that name: `require_declared=False`)."""
        return archive.rejected(self.context, self.name)

    # -- queries ------------------------------------------------------------------------
    def history(
        self, key: Key, *, known_at: When | None = None, include_retracted: bool = False
    ) -> list[Version]:
        """Versions of one entity in valid-time order."""
        from feedledger.pipeline import query  # lazy: SQLAlchemy, Arrow

        found = query.history(
            self.context,
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
        see `feedledger.api._source.history_frame`. A key never recorded: NotFoundError, as
        `history`."""
        found: list[Version] = []
        for one in history_frame.keys_asked(self.name, key, keys):
            found += self.history(one, known_at=known_at, include_retracted=include_retracted)
        return history_frame.frame(found, self.config.key, geo=self.config.is_geo)

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
        from feedledger.pipeline import query  # lazy: SQLAlchemy, Arrow

        answer = query.asof(
            self.context,
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

    def gaps(self, *, known_at: When | None = None, include_retracted: bool = False) -> list[Gap]:
        from feedledger.pipeline import query  # lazy: SQLAlchemy, Arrow

        found = query.list_gaps(
            self.context,
            self.name,
            include_retracted=include_retracted,
            known_at=self._opt_us(known_at, "known_at"),
        )
        return [Gap.of(g) for g in found]

    def add_gap(self, start: When | str, end: When | str, reason: str) -> Gap:
        """Record that the source was not observed from `start` to `end` (days, inclusive;
        text as the CLI takes it too)."""
        from feedledger.pipeline.manual import add_gap  # lazy: SQLAlchemy, Arrow

        lo, hi = self._day(start, "start"), self._day(end, "end")
        return Gap.of(add_gap(self.context, self.name, lo, hi, reason))

    def layer(self) -> Layer:
        """The source read as a layer of features a page at a time (the OGC API -
        Features that `serve` answers: `feedledger.api.features`)."""
        return Layer(self.context, self.config)

    def watermark(self) -> Watermark:
        wm = self.context.store.watermark(self.name)
        if wm is None:
            return Watermark(self.name, None, None)
        return Watermark(self.name, opt_dt(wm.published_at), wm.payload_id)

    def calendar(self, start: date | None = None, end: date | None = None) -> Calendar:
        """The publication calendar from `start` to `end` (inclusive; defaults: the first
        publication or gap, and today in the source's timezone), at most
        `calendar.MAX_DAYS` days (the last): one cell per expected publication day (and
        per day a publication arrived on outside the cadence) saying what became of it."""
        return calendars.build(self.context, self.config, self.gaps(), start, end)
