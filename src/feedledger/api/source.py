"""`Ledger.source(name)`: one declared source -- its runs (ingest, run, backfill,
replay), queries (history, asof, snapshot, gaps, watermark), freezes and archive.

Times are typed: a `date` is 00:00 of that day in the source's timezone, an aware
`datetime` that instant, a naive one a wall-clock time in the source's timezone."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

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
from feedledger.api.results import Ingested
from feedledger.api.source_queries import SourceQueries
from feedledger.api.times import When
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
    from feedledger.api.archive import PayloadFiles
    from feedledger.api.ledger import Ledger
    from feedledger.context import Context

RunResult = Ingested | Recovered | NothingToDo | NotModified


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


class Source(SourceQueries):
    """One declared source: its runs, queries (see SourceQueries), freezes, archive."""

    def __init__(self, ledger: Ledger, config: SourceConfig) -> None:
        self.ledger = ledger
        self.config = config
        self.name = config.name

    def __repr__(self) -> str:
        return f"Source({self.name!r})"

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
        from feedledger.pipeline.catchup.recovery import Recovery
        from feedledger.pipeline.run import NothingNew, run_source

        result = run_source(
            self._ctx,
            self.name,
            allow_mass_delete=allow_mass_delete,
            recover=recover,
            allow_future=allow_future,
            accept_restored=accept_restored,
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
        from feedledger.pipeline.catchup.assess import assess

        lo = day_arg(self._ctx, self.name, start, "start")
        hi = day_arg(self._ctx, self.name, end, "end")
        return Assessment.of(assess(self._ctx, self.name, lo, hi, fetch=fetch))

    def verify(self) -> Verification:
        from feedledger.pipeline.verify import verify

        return Verification.of(verify(self._ctx, self.name))

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
