"""Live runs: archive a payload, then apply it (one run, one source, one lease).

Order of work (and the crash boundaries the tests exercise):
  1. archive the bytes raw (content-addressed, fsynced)      -> `after_archive`
     -- on a second core (the `archive` stage, pipeline/intake/stages.py), while the payload
     is parsed and validated (bad input: clear error, ledger untouched, bytes kept)
  2. index the payload in the store                          -> `after_register`
     (1 and 2: pipeline/intake/archiving.archive_publication, as for every publication)
  3. the payload diffed against the source's state as it stands (read-only, ahead of
     the lease; `apply.diff_ahead`: beside the compression of 4, or before 1's bytes are
     all written, beside that), then refused if already applied (nothing changes) or
     stale (not after the watermark)
  4. lease + run row, the diff (the one computed ahead, if the source has not changed
     since), ONE transaction for the payload                 -> `mid_transaction`,
     `before_commit`, `after_commit`
     -- beside 3 and 4, on the other core: the raw object compressed against the
     source's previous payload, then deleted (`archive/settle.py`)  -> `before_settle`,
     `settle_written`; the process ends once that is done (a resident process, the
     scheduler, queues it instead: `Context.after_apply`, and goes on)
A rerun after a crash at any point re-archives as a no-op and either finds the
payload applied (nothing repeated) or applies it whole (nothing lost).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from feedledger.context import Context
from feedledger.model.errors import BadPayloadError, ConfigError, StoreUnavailableError
from feedledger.model.payload import PayloadRef
from feedledger.model.sizes import within_default
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import check_not_future, epoch_us, now_us, parse_instant, to_us
from feedledger.pipeline.intake.allocators import release_promptly
from feedledger.pipeline.intake.archiving import (
    archive_publication,
    date_publication,
    keep_rejected,
)
from feedledger.pipeline.intake.live_apply import IngestResult, apply_archived
from feedledger.pipeline.intake.stages import Stages
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.formats import Observations
    from feedledger.ledger.store import Store
    from feedledger.pipeline.intake.apply import Ahead

# The ledger modules (SQLAlchemy, the driver) are imported by `warm_store` in the
# `store` stage while the payload is parsed, not when this module is imported; the
# readers (polars) by `ingest` once the archive has the bytes on the other core.


def ingest(
    ctx: Context,
    source: str,
    data: bytes,
    *,
    published_at: str | int | None,
    original_name: str | None = None,
    content_type: str | None = None,
    allow_mass_delete: bool = False,
    fetched_at: int | None = None,
    allow_future: bool = False,
    metadata: dict[str, Any] | None = None,
    pre_read: Callable[[str], Observations | None] | None = None,
) -> IngestResult:
    """Archive `data` as a publication of `source` and apply it as a live run.

    The bytes are stored (content-addressed, fsynced) first, while a second core parses
    them. A payload that cannot be read keeps its bytes plus a note under `rejected/`
    but never claims its publication slot, so a corrected file for the same date can
    follow. A readable one gets its sidecar (with `metadata`, what a portal connector
    stated about it) and index row, then is applied. `pre_read`: the payload as read
    while it downloaded (formats/spatial/geo_pages.py; see `read_observations`)."""
    fetched_at = fetched_at or now_us()
    src, when = date_publication(
        ctx,
        source,
        data,
        published_at=published_at,
        original_name=original_name,
        fetched_at=fetched_at,
        allow_future=allow_future,
        dated_by_field=True,
    )
    # a payload too large for the whole path, of a source without a budget: read, diffed
    # and compressed within the default one (pipeline/intake/bounded.py)
    declared, src = src, within_default(src, len(data))
    # a budgeted payload's freed memory goes back to the system at once (before polars
    # is loaded, below: pipeline/intake/allocators.py)
    release_promptly(src, own=declared.memory_budget is not None)
    label = original_name or "payload"
    with Stages() as stages:
        # raw: compressed after it is archived under the source, beside the transaction
        storing = stages.start("archive", _store_raw, ctx, data, src.name)
        # opening the store (driver import, connection, schema check) also overlaps the
        # parse; its errors surface below, after the bytes are archived
        opening = stages.start("store", warm_store, ctx)
        # lazy: the archive hashes and compresses the bytes (no GIL) while polars and
        # the readers load
        from feedledger.formats import published_from_field, read_observations  # lazy: see above

        try:
            with stage("read"):
                obs = read_observations(data, src, label=label, pre_read=pre_read)
            if when is None:
                when = published_from_field(
                    obs,
                    src,
                    label,
                    lambda t: check_not_future(
                        _field_date(src, t), fetched_at, allow_future=allow_future
                    ),
                )
        except (BadPayloadError, ConfigError) as exc:
            storing.result()
            exc.extend(keep_rejected(ctx, source, data, original_name, str(exc)))
            raise
        with stage("store_wait"):
            opened = opening.result()
        # the diff ahead of the lease (read-only: the ledger sees the payload only once
        # it is archived, below) runs beside the compression (`after`, below), unless the
        # archive is still writing the bytes: then beside that, as the wait's cover
        diffed = storing.is_alive() and opened is None
        ahead = _diff_ahead(ctx, src, obs) if diffed else None
        with stage("archive_wait"):
            sha = storing.result()
    if src.is_geo and opened is None:
        # a layer in another CRS is bad input: refused before it claims its publication
        # slot (a reprojected file for the same date can follow), its bytes kept
        from feedledger.pipeline.intake.apply import check_source_crs  # lazy: see warm_store

        try:
            check_source_crs(ctx, src, label, obs)
        except BadPayloadError as exc:
            exc.extend(keep_rejected(ctx, source, data, original_name, str(exc)))
            raise

    def store_for(ref: PayloadRef) -> Store:
        if opened is not None:
            raise unreachable(opened, src.name, ref.label)
        return open_store(ctx, src.name, ref.label)

    ref, created = archive_publication(
        ctx,
        src,
        data,
        published_at=when,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=content_type,
        metadata=metadata,
        sha256=sha,
        open_store=store_for,
    )
    from feedledger.pipeline.intake import bounded  # lazy: polars, loaded by the read by now

    if bounded.compress_streamed(src, obs, len(data)) or bounded.compress_after(src, obs):
        # read in batches to fit its budget: its bytes dropped before it is applied
        size, held = len(data), [obs]
        del data, obs
        return apply_bounded(
            ctx, declared, src, ref, created, held, size, allow_mass_delete=allow_mass_delete
        )
    if ctx.after_apply is not None:
        # a resident process (the scheduler): the raw object is compressed on its queue,
        # beside this payload's transaction and after it, and the run returns once the
        # payload is applied (a kill before the compression leaves a valid raw object,
        # which the source's next settle or `archive compact` compresses)
        archive, name, sha, at = ctx.archive, src.name, ref.sha256, ref.published_at
        ctx.after_apply(lambda: archive.settle(name, sha, at))
        del data
        if not diffed and opened is None:  # (the diff ahead: as below)
            ahead = _diff_ahead(ctx, src, obs)
        try:
            return apply_archived(
                ctx,
                src,
                ref,
                created=created,
                obs=obs,
                allow_mass_delete=allow_mass_delete,
                ahead=ahead,
            )
        finally:
            # then the log the transaction wrote is copied into the database file, on
            # the same queue: not by the next payload's warm-up, beside its parse (a
            # first load's ~0.5 GB log made the next day's ingest the slowest)
            ctx.after_apply(lambda: _checkpoint(ctx))
    with Stages() as after:
        # the raw object compressed on the other core while the payload is diffed and
        # applied (archive/settle.py); the process waits for it below, or on leaving the
        # block. Started as soon as the payload is archived under its source: its
        # compression is the longest thing beside the apply, and the process's tail
        compressing = after.start(
            "compress", ctx.archive.settle, src.name, ref.sha256, ref.published_at
        )
        # the bytes are archived and parsed: dropped here (freed, where the caller passed
        # its only reference, as the CLI's `ingest` and `run` do: settle reads the file)
        del data
        if not diffed and opened is None:
            ahead = _diff_ahead(ctx, src, obs)
        result = apply_archived(
            ctx,
            src,
            ref,
            created=created,
            obs=obs,
            allow_mass_delete=allow_mass_delete,
            ahead=ahead,
        )
        with stage("compress_wait"):
            compressing.result()
    return result


def apply_bounded(
    ctx: Context,
    declared: SourceConfig,
    src: SourceConfig,
    ref: PayloadRef,
    created: bool,
    held: list[Observations],
    size: int,
    *,
    allow_mass_delete: bool,
) -> IngestResult:
    """Apply an archived payload read in batches to fit its budget (`held`: its
    observations, the only reference: dropped once applied, before the compression),
    then compress its raw object. The caller holds its bytes no more."""
    from feedledger.pipeline.intake import bounded  # lazy: polars, loaded by the read by now

    obs = held.pop()
    if bounded.compress_streamed(src, obs, size):
        # its object compressed from its file, a chunk at a time: afterwards, or on the
        # other core beside the apply under the default bound
        if not bounded.streamed_beside(declared, src):
            result = apply_archived(
                ctx, src, ref, created=created, obs=obs, allow_mass_delete=allow_mass_delete
            )
            del obs
            with stage("compress"):
                ctx.archive.settle_streamed(src.name, ref.sha256)
            return result
        with Stages() as after:
            compressing = after.start("compress", ctx.archive.settle_streamed, src.name, ref.sha256)
            result = apply_archived(
                ctx, src, ref, created=created, obs=obs, allow_mass_delete=allow_mass_delete
            )
            del obs
            with stage("compress_wait"):
                compressing.result()
        return result
    # compressed (against the source's previous payload) only once applied or refused,
    # its base and compressor never beside the apply (settle reads the raw object from
    # its file)
    try:
        return apply_archived(
            ctx, src, ref, created=created, obs=obs, allow_mass_delete=allow_mass_delete
        )
    finally:
        del obs
        with stage("compress"):
            ctx.archive.settle(src.name, ref.sha256, ref.published_at)


def _store_raw(ctx: Context, data: bytes, source: str) -> str:
    """The `archive` stage: the payload's object stored raw (hashed, written, fsync'd)."""
    return ctx.archive.put_object(data, source, later=True)


def _diff_ahead(ctx: Context, src: SourceConfig, obs: Observations) -> Ahead | None:
    from feedledger.pipeline.intake.apply import diff_ahead  # lazy: see warm_store

    return diff_ahead(ctx, src, obs)


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _field_date(src: SourceConfig, text: str) -> int:
    """A `field:NAME` publisher date as us UTC: ISO-8601 text, or for an ArcGIS layer
    the number an Esri date field holds (epoch milliseconds)."""
    if src.connector == "arcgis" and _NUMBER.fullmatch(text.strip()):
        us = epoch_us(float(text) if not text.strip().lstrip("-").isdigit() else int(text), 1_000)
        if us is None:
            raise ConfigError(
                f"publisher date {text.strip()} is not a date (epoch milliseconds between "
                "the years 1 and 9999)"
            )
        return us
    return to_us(parse_instant(text, src.timezone, what="publisher date"))


def warm_store(ctx: Context) -> StoreUnavailableError | None:
    """Open the store ahead of need (importing the ledger modules, connecting, checking
    the schema, checkpointing an SQLite log the previous writer left); an unreachable
    store is returned, not raised."""
    try:
        ctx.store.checkpoint()
        import feedledger.pipeline.intake.apply  # noqa: F401 - lazy: imported here, off the main thread
    except StoreUnavailableError as exc:
        return exc
    return None


def _checkpoint(ctx: Context) -> None:
    """`Store.checkpoint` where the store is reachable (where not, the next writer does it)."""
    with suppress(StoreUnavailableError):
        ctx.store.checkpoint()


def unreachable(exc: StoreUnavailableError, source: str, label: str) -> StoreUnavailableError:
    return StoreUnavailableError(
        exc.problem + " (the payload is archived and will apply once the store is back)",
        source=source,
        payload=label,
        hint=exc.hint,
    )


def open_store(ctx: Context, source: str, label: str) -> Store:
    """The store, with an unreachable one named for the source and payload at hand."""
    try:
        return ctx.store
    except StoreUnavailableError as exc:
        raise unreachable(exc, source, label) from None
