"""A live run of a payload file too large for its source's budget to hold its bytes:
read from the archive's copy of the file, a piece at a time.

`ingest` holds a payload's bytes until they are archived and parsed (a 10M-parcel CSV:
1 GiB beside everything else). For a plain CSV file that its source reads in batches
anyway (`formats.readers.reads_from_file`: over the budget's whole-read share, with a
`memory_budget` or the default bound), `ingest_file` instead:
  1. copies the file into the archive's folder (`LocalArchive.stage`: a kernel copy,
     fsync'd, read-only: what is parsed is what is archived, whatever happens to the
     caller's file meanwhile);
  2. on a second core, hashes that copy and links it into place as the raw object
     (`LocalArchive.commit`: `put_object(..., later=True)`'s object) while the main
     thread reads the copy a piece at a time (`read_observations_file`);
  3. goes on as `ingest` does for a payload read in batches: the publication indexed,
     applied in ONE transaction, then its object compressed from its file
     (`ingest.apply_bounded`).
The ledger records exactly what `ingest` of the same bytes records. Anything else --
another archive (an object store), a compressed or non-UTF-8 file, a payload dated by a
field, an unknown source or a refused date, a file that cannot be opened -- takes
`ingest` of the bytes (`whole()`), whose errors and kept copies are the usual ones; bad
input found by the read keeps the bytes under `rejected/` as `ingest` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.archive import LocalArchive
from feedledger.context import Context
from feedledger.model.errors import BadPayloadError, FeedledgerError
from feedledger.model.payload import PayloadRef
from feedledger.model.sizes import within_default
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import now_us
from feedledger.pipeline.intake.allocators import release_promptly
from feedledger.pipeline.intake.archiving import (
    archive_publication,
    keep_rejected,
    resolve_published_at,
)
from feedledger.pipeline.intake.ingest import (
    apply_bounded,
    ingest,
    open_store,
    unreachable,
    warm_store,
)
from feedledger.pipeline.intake.live_apply import IngestResult
from feedledger.pipeline.intake.stages import Stages
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.ledger.store import Store

# The first bytes of the file that tell whether it is read from its copy
HEAD_BYTES = 1 << 16


def ingest_file(
    ctx: Context,
    source: str,
    path: Path,
    whole: Callable[[], bytes],
    *,
    published_at: str | int | None,
    original_name: str | None = None,
    content_type: str | None = None,
    allow_mass_delete: bool = False,
    allow_future: bool = False,
) -> IngestResult:
    """`ingest(ctx, source, whole(), ...)` of the file at `path` (`whole()`: its bytes),
    read from the archive's copy of the file when its source reads it in batches (the
    module doc); the same result either way."""
    fetched_at = now_us()
    planned = _plan(ctx, source, path, published_at, original_name, fetched_at, allow_future)
    if planned is None:
        return ingest(
            ctx,
            source,
            whole(),
            published_at=published_at,
            original_name=original_name,
            content_type=content_type,
            allow_mass_delete=allow_mass_delete,
            fetched_at=fetched_at,
            allow_future=allow_future,
        )
    archive, declared, src, when = planned
    label = original_name or "payload"
    staged = archive.stage(path)
    try:
        with Stages() as stages:
            storing = stages.start("archive", archive.commit, staged)
            opening = stages.start("store", warm_store, ctx)
            from feedledger.formats.readers import read_observations_file  # lazy: polars

            try:
                with stage("read"):
                    obs = read_observations_file(staged.path, src, label=label)
            except BadPayloadError as exc:
                storing.wait()
                data = staged.path.read_bytes()  # (bad input: kept as it was read)
                exc.extend(keep_rejected(ctx, source, data, original_name, str(exc)))
                raise
            with stage("store_wait"):
                opened = opening.result()
            with stage("archive_wait"):
                sha = storing.result()
    finally:
        staged.close()

    def store_for(ref: PayloadRef) -> Store:
        if opened is not None:
            raise unreachable(opened, src.name, ref.label)
        return open_store(ctx, src.name, ref.label)

    ref, created = archive_publication(
        ctx,
        src,
        b"",
        published_at=when,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=content_type,
        sha256=sha,
        open_store=store_for,
        size=staged.size,
    )
    held = [obs]
    del obs
    return apply_bounded(
        ctx, declared, src, ref, created, held, staged.size, allow_mass_delete=allow_mass_delete
    )


def _plan(
    ctx: Context,
    source: str,
    path: Path,
    published_at: str | int | None,
    original_name: str | None,
    fetched_at: int,
    allow_future: bool,
) -> tuple[LocalArchive, SourceConfig, SourceConfig, int] | None:
    """(the archive, the source as declared and as bounded, the publisher date) when the
    file is read from its copy (the module doc); None: `ingest` of its bytes."""
    archive = ctx.archive
    if not isinstance(archive, LocalArchive):
        return None
    try:
        declared = ctx.workspace.source(source)
        when = resolve_published_at(
            declared, published_at, original_name, now=fetched_at, allow_future=allow_future
        )
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
    except (FeedledgerError, OSError):
        return None  # said by `ingest` of the bytes (or their read), as always
    if when is None:
        return None
    src = within_default(declared, size)
    if src.memory_budget is None or src.format != "csv":
        return None  # read whole (and polars loaded by `ingest`, beside the archiving)
    # a budgeted payload's freed memory goes back to the system at once: set before
    # polars is loaded (pipeline/intake/allocators.py); `ingest` sets the same for the bytes
    release_promptly(src, own=declared.memory_budget is not None)
    from feedledger.formats.readers import reads_from_file  # lazy: polars

    if not reads_from_file(src, size, head):
        return None
    return archive, declared, src, when
