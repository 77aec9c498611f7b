"""Archiving a publication, the one way a payload enters the archive and the store's
index: `date_publication` (its source and publisher date, refused with the bytes kept
under `rejected/`) then `archive_publication` (the bytes stored, the payload indexed).
Used by an ingest (pipeline/intake/ingest.py), `archive add` (`archive_add`), backfill's
fetch (pipeline/catchup/served.py) and a connector's publication that went back in time
(pipeline/intake/observing.py). Also: checking the files an `archive add` was given, and
rebuilding the index from the archive folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger import faults
from feedledger.context import Context
from feedledger.model.errors import (
    AmbiguousPayloadError,
    ConfigError,
    FeedledgerError,
    NotFoundError,
)
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import check_not_future, now_us, parse_instant, to_us
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.ledger.store import Store


def keep_rejected(
    ctx: Context, source: str, data: bytes, name: str | None, reason: str, *, filed: bool = True
) -> str:
    """Bad input is still archived for inspection, even without a usable date/source
    (filed under the source when it is known: `archive list SOURCE --rejected`).
    Returns what the refusal adds: where the bytes were kept."""
    where = ctx.archive.keep_rejected(source, data, original_name=name, reason=reason, filed=filed)
    return f"the bytes are kept at {where}"


def resolve_published_at(
    src: SourceConfig,
    published_at: str | int | None,
    name: str | None,
    *,
    now: int | None = None,
    allow_future: bool = False,
) -> int | None:
    """An explicit value wins; else the file name's date when the source says so.
    Given `now` (the caller's clock, e.g. the fetch time), a date more than a day after
    it is refused unless `allow_future` (timeutil.check_not_future): typed, named, or a
    fetcher's (a portal's edit date, an HTTP Last-Modified) -- every date a payload is
    archived or ingested with passes here."""
    if isinstance(published_at, int):
        if now is not None:
            check_not_future(
                published_at, now, what="the publisher's date", allow_future=allow_future
            )
        return published_at
    found: int | None = None
    if published_at is not None:
        found = to_us(parse_instant(published_at, src.timezone, what="--published-at"))
    elif src.published_from.by_filename and name:
        from feedledger.sources import date_in_name  # lazy: the fetchers load httpx

        found = date_in_name(Path(name).name, src.timezone)
    if found is not None and now is not None:
        what = "--published-at" if published_at is not None else "publisher date in the name"
        check_not_future(found, now, what=what, allow_future=allow_future)
    return found


def date_publication(
    ctx: Context,
    source: str,
    data: bytes,
    *,
    published_at: str | int | None,
    original_name: str | None,
    fetched_at: int,
    allow_future: bool = False,
    dated_by_field: bool = False,
) -> tuple[SourceConfig, int | None]:
    """The source a publication is archived under and its publisher date (as given, or
    from the file name; `resolve_published_at`). An unknown source or a date that is
    missing or refused raises, the bytes kept under `rejected/` and the error saying
    where. None only with `dated_by_field` for a source dated by a field of the payload
    (an ingest reads it there)."""
    try:
        src = ctx.workspace.source(source)
    except FeedledgerError as exc:
        kept = keep_rejected(ctx, source, data, original_name, str(exc), filed=False)
        raise NotFoundError(
            f"{exc.problem}; {kept}", source=source, payload=original_name, hint=exc.hint
        ) from None
    try:
        when = resolve_published_at(
            src, published_at, original_name, now=fetched_at, allow_future=allow_future
        )
    except ConfigError as exc:
        kept = keep_rejected(ctx, source, data, original_name, str(exc))
        exc.source, exc.payload = source, original_name  # kept: its type, its date
        raise exc.extend(kept) from None
    if when is None and not (dated_by_field and src.published_from.field is not None):
        kept = keep_rejected(ctx, source, data, original_name, "no publisher date")
        raise ConfigError(
            "no publisher date: pass --published-at DATE (the publisher's date, never "
            f"today's by default); {kept}",
            source=source,
            payload=original_name,
        )
    return src, when


def archive_publication(
    ctx: Context,
    src: SourceConfig,
    data: bytes,
    *,
    published_at: int,
    fetched_at: int,
    original_name: str | None = None,
    content_type: str | None = None,
    metadata: dict[str, Any] | None = None,
    sha256: str | None = None,
    open_store: Callable[[PayloadRef], Store] | None = None,
    size: int | None = None,
) -> tuple[PayloadRef, bool]:
    """Archive `data` as `src`'s publication dated `published_at` (write-once,
    content-addressed, fsynced; its sidecar with `metadata`, what a portal connector
    stated about it) and index it in the store. Returns (ref, created: the bytes were
    new to the archive). `sha256`: the object is stored already (`Archive.put_object`,
    an ingest's `archive` stage). `open_store(ref)`: the store, reached the caller's
    way (an ingest names an unreachable one for the payload); `ctx.store` by default.
    `size` (with `sha256`, `data` empty): the object was stored from its file
    (`LocalArchive.commit`). Crash boundaries: `after_archive`, `after_register`."""
    with stage("archive"):
        ref, created = ctx.archive.put(
            src.name,
            data,
            published_at=published_at,
            fetched_at=fetched_at,
            original_name=original_name,
            content_type=content_type,
            sha256=sha256,
            metadata=metadata,
            size=size,
        )
    faults.point("after_archive")
    with stage("store_open"):
        store = ctx.store if open_store is None else open_store(ref)
    with stage("register"):
        store.register_payload(ref)
    faults.point("after_register")
    return ref, created


def archive_add(
    ctx: Context,
    source: str,
    data: bytes,
    *,
    published_at: str | int | None,
    original_name: str | None,
    content_type: str | None = None,
    allow_future: bool = False,
    metadata: dict[str, Any] | None = None,
) -> tuple[PayloadRef, bool]:
    """Archive bytes without applying them (`archive add`, backfill's fetch). Returns
    (ref, created). A publisher date more than a day after now is refused unless
    `allow_future`; `metadata` (a portal connector's) goes into the sidecar."""
    fetched_at = now_us()
    src, when = date_publication(
        ctx,
        source,
        data,
        published_at=published_at,
        original_name=original_name,
        fetched_at=fetched_at,
        allow_future=allow_future,
    )
    assert when is not None  # not dated by a field: refused above
    return archive_publication(
        ctx,
        src,
        data,
        published_at=when,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=content_type,
        metadata=metadata,
    )


@dataclass
class Batch:
    """The files an `archive add` was given, expanded: a folder becomes its dated payload
    files (oldest first; undated ones are `skipped`)."""

    files: list[Path]
    skipped: list[str] = field(default_factory=list)


def expand_files(
    ctx: Context, source: str, given: list[Path], *, published_at: str | None
) -> Batch:
    """Check an `archive add` request before anything is archived: with `published_at`,
    exactly one file; otherwise every file must carry its publisher date in its name
    (the source's `published_from = "filename"`)."""
    from feedledger.sources.directory import listing  # lazy: the fetchers load httpx

    src = ctx.workspace.source(source)
    batch = Batch([])
    for path in given:
        if path.is_dir():
            dated, undated = listing(path, src.timezone, source)
            batch.files.extend(p for _at, p in dated)
            batch.skipped.extend(str(path / n) for n in undated)
        else:
            batch.files.append(path)
    if published_at is not None:
        if len(batch.files) != 1 or len(given) != 1 or given[0].is_dir():
            raise ConfigError(
                f"--published-at dates ONE file, but {len(batch.files)} were given",
                source=source,
                hint="leave --published-at out to date each file from its name",
            )
        return batch
    if not batch.files:
        raise ConfigError(
            "no payload file to archive"
            + (
                f" (skipped, no date in the name: {', '.join(batch.skipped[:5])})"
                if batch.skipped
                else ""
            ),
            source=source,
        )
    if not src.published_from.by_filename:
        raise ConfigError(
            f"the source dates its payloads by {str(src.published_from)!r}, not by file name",
            source=source,
            hint="archive one file at a time with --published-at DATE",
        )
    undated = [p.name for p in batch.files if resolve_published_at(src, None, p.name) is None]
    if undated:
        raise ConfigError(
            f"{len(undated)} file(s) carry no date in their name: {', '.join(undated[:5])}"
            + (f" and {len(undated) - 5} more" if len(undated) > 5 else "")
            + "; nothing was archived",
            source=source,
            hint="name files with a date (parcels_2026-08-06.csv), or archive one with "
            "--published-at DATE",
        )
    return batch


@dataclass
class ReindexResult:
    scanned: int = 0
    added: int = 0
    present: int = 0
    ambiguous: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "added": self.added,
            "present": self.present,
            "ambiguous": self.ambiguous,
        }


def reindex(ctx: Context) -> ReindexResult:
    """Rebuild the payload index from the archive folder alone (idempotent)."""
    result = ReindexResult()
    for ref in ctx.archive.scan():
        result.scanned += 1
        try:
            if ctx.store.register_payload(ref):
                result.added += 1
            else:
                result.present += 1
        except AmbiguousPayloadError as exc:
            result.ambiguous.append(
                {"payload_id": ref.payload_id, "source": ref.source, "problem": str(exc)}
            )
    return result
