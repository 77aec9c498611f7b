"""`Ledger.source(name)`: one declared source -- its runs (ingest, run, backfill,
replay), queries (history, asof, snapshot, gaps, watermark), freezes, archive and
publication calendar.

Times are typed: a `date` is 00:00 of that day in the source's timezone, an aware
`datetime` that instant, a naive one a wall-clock time in the source's timezone."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from feedledger.api import archive
from feedledger.api import calendar as calendars
from feedledger.api._source import history_frame, payloads
from feedledger.api._source.snapshot_methods import SnapshotMethods
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
    Verification,
    Version,
    Watermark,
    WindowRun,
)
from feedledger.api.times import When, opt_dt
from feedledger.api.windows import (
    OnPlan,
    OnProgress,
    OnReplayPlan,
    plan_relay,
    progress_relay,
    replay_plan_relay,
    window_result,
)

if TYPE_CHECKING:
    import polars as pl

RunResult = Ingested | Recovered | NothingToDo | NotModified
Key = str | int | list[Any] | tuple[Any, ...]


def _key_text(key: Key) -> str:
    """A key as the CLI takes it: a single value, or a JSON array for a compound key."""
    if isinstance(key, list | tuple):
        return json.dumps(list(key), ensure_ascii=False)
    return str(key)


class Source(SnapshotMethods):
    """One source of the workspace `context`: its runs, queries, freezes, archive.

    `led.source(name)` is a declared one; `led.source(name, require_declared=False)` may
    name one that is not (yet, or any more): its `ingest` keeps the refused bytes for
    inspection, its `rejected_payloads` reads the archive alone, and what needs the
    declaration raises SourceNotFound.

    Its name, declaration and typed times: `_source/base.py`; the source as it stood
    at a valid time (snapshots and their exports): `_source/snapshot_methods.py`."""

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
        from feedledger.pipeline.intake.run import (
            run_source,  # lazy: a snapshot loads no payload reader
        )

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
        from feedledger.pipeline.catchup.replay import replay  # lazy: SQLAlchemy, Arrow

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
        from feedledger.ledger.runs.lookup import list_runs  # lazy: SQLAlchemy, Arrow

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
