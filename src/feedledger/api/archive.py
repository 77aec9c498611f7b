"""The archive through the public API: the payload files an `archive add` names, the
refused payloads kept for inspection, and rebuilding the store's payload index from the
archive alone (`led.rejected_payloads`, `led.reindex_archive`, `src.payload_files`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.reports import _Raw
from feedledger.api.times import opt_dt

if TYPE_CHECKING:
    from feedledger.context import Context


@dataclass(frozen=True)
class PayloadFiles:
    """The files an `archive add` was given, expanded: a folder becomes its dated payload
    files, oldest first; its undated ones are `skipped` (paths as text)."""

    files: list[Path]
    skipped: list[str]


@dataclass(frozen=True)
class Rejected(_Raw):
    """A refused payload (unreadable, undated or ambiguous bytes) kept for inspection."""

    source: str
    kind: str
    sha256: str
    size: int
    reason: str
    original_name: str | None
    rejected_at: datetime | None
    location: str  # where the bytes are (object path or URL)
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> Rejected:
        return cls(
            r.source,
            r.kind,
            r.sha256,
            r.size,
            r.reason,
            r.original_name,
            opt_dt(r.rejected_at),
            r.location,
            r,
        )


@dataclass(frozen=True)
class Reindexed(_Raw):
    """What rebuilding the payload index found: sidecars scanned, payloads added, already
    indexed, and the ambiguous ones (each with payload_id, source and problem)."""

    scanned: int
    added: int
    present: int
    ambiguous: list[dict[str, Any]]
    _raw: Any = field(repr=False, compare=False)


def payload_files(
    ctx: Context,
    source: str,
    paths: list[str | os.PathLike[str]],
    *,
    published_at: str | None = None,
) -> PayloadFiles:
    """Check an `archive add` request before anything is archived (with `published_at`,
    exactly one file; otherwise every file dated by its name)."""
    from feedledger.pipeline.archiving import expand_files

    batch = expand_files(ctx, source, [Path(p) for p in paths], published_at=published_at)
    return PayloadFiles(list(batch.files), list(batch.skipped))


def rejected(ctx: Context, source: str) -> list[Rejected]:
    """Refused payloads of `source`, read from the archive alone (the source need not be
    declared: bytes sent under a mistyped name are listed under that name)."""
    return [Rejected.of(r) for r in ctx.archive.rejected(source)]


def reindex(ctx: Context) -> Reindexed:
    from feedledger.pipeline.archiving import reindex as rebuild

    r = rebuild(ctx)
    return Reindexed(r.scanned, r.added, r.present, list(r.ambiguous), r)
