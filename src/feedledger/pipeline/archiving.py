"""Archive-level operations: add payloads without applying them (one file, several, or a
folder), rebuild the index."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedledger import faults
from feedledger.context import Context
from feedledger.model.errors import AmbiguousPayloadError, ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import now_us
from feedledger.pipeline.ingest import _keep_rejected, resolve_published_at


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
    """Archive bytes (write-once, fsynced) and index them. Returns (ref, created).
    A publisher date more than a day after now is refused unless `allow_future`;
    `metadata` (a portal connector's) goes into the sidecar."""
    src = ctx.workspace.source(source)
    fetched_at = now_us()
    try:
        when = resolve_published_at(
            src, published_at, original_name, now=fetched_at, allow_future=allow_future
        )
    except ConfigError as exc:
        kept = _keep_rejected(ctx, source, data, original_name, str(exc))
        exc.source, exc.payload = source, original_name  # kept: its type, its date
        raise exc.extend(kept) from None
    if when is None:
        kept = _keep_rejected(ctx, source, data, original_name, "no publisher date")
        raise ConfigError(
            f"no publisher date: pass --published-at DATE; {kept}",
            source=source,
            payload=original_name,
        )
    ref, created = ctx.archive.put(
        src.name,
        data,
        published_at=when,
        fetched_at=fetched_at,
        original_name=original_name,
        content_type=content_type,
        metadata=metadata,
    )
    faults.point("after_archive")
    ctx.store.register_payload(ref)
    return ref, created


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
    from feedledger.sources.directory import listing

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
