"""The archive through the public API: the payload files an `archive add` names, the
refused payloads kept for inspection, rebuilding the store's payload index from the
archive alone, compressing it in place and re-reading every payload
(`src.rejected_payloads`, `led.reindex_archive`, `led.compact_archive`,
`led.verify_archive`, `src.payload_files`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.results import Raw
from feedledger.api.times import opt_dt
from feedledger.pipeline.intake.archiving import expand_files
from feedledger.pipeline.intake.archiving import reindex as rebuild

if TYPE_CHECKING:
    from feedledger.context import Context

# (payloads done, payloads in all, the payload id just done or None at the start)
OnArchiveProgress = Callable[[int, int, str | None], None]


@dataclass(frozen=True)
class PayloadFiles:
    """The files an `archive add` was given, expanded: a folder becomes its dated payload
    files, oldest first; its undated ones are `skipped` (paths as text)."""

    files: list[Path]
    skipped: list[str]


@dataclass(frozen=True)
class Rejected(Raw):
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
class Reindexed(Raw):
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
    batch = expand_files(ctx, source, [Path(p) for p in paths], published_at=published_at)
    return PayloadFiles(list(batch.files), list(batch.skipped))


def rejected(ctx: Context, source: str) -> list[Rejected]:
    """Refused payloads of `source`, read from the archive alone (the source need not be
    declared: bytes sent under a mistyped name are listed under that name)."""
    return [Rejected.of(r) for r in ctx.archive.rejected(source)]


def reindex(ctx: Context) -> Reindexed:
    r = rebuild(ctx)
    return Reindexed(r.scanned, r.added, r.present, list(r.ambiguous), r)


@dataclass(frozen=True)
class ArchiveCompacted:
    """`archive compact`: per payload (`items`, each a JSON object) and in all: how many
    were compressed now, already, kept raw (compressing saved nothing), shared another
    payload's object, or could not be read (`bad`, left as they were); the payloads'
    original bytes (`raw_bytes`) and the archive's bytes for them before and after."""

    source: str | None
    payloads: int
    compacted: int
    already: int
    kept_raw: int
    shared: int
    bad: int
    raw_bytes: int
    stored_before: int
    stored_after: int
    items: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ArchiveVerified:
    """`archive verify`: every payload read back whole and its sha256 checked (`items`,
    each a JSON object with `ok` and the `error` naming the object when not)."""

    source: str | None
    payloads: int
    ok: int
    bad: int
    raw_bytes: int
    stored_bytes: int
    items: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _relay(progress: OnArchiveProgress | None) -> Any:
    if progress is None:
        return None
    return lambda done, total, ref: progress(done, total, ref.payload_id if ref else None)


def _known(ctx: Context, source: str | None) -> None:
    """A named source must be declared or hold archived payloads (one no longer declared
    may still be compacted or checked): a typo is an error, not an empty report that
    reads as "nothing to do"."""
    if source is not None and source not in ctx.workspace.sources and not ctx.archive.list(source):
        ctx.workspace.source(source)  # the unknown-source error, naming the known ones


def compact(
    ctx: Context, source: str | None, progress: OnArchiveProgress | None = None
) -> ArchiveCompacted:
    _known(ctx, source)
    items = [i.to_json() for i in ctx.archive.compact(source, _relay(progress))]
    unique = [i for i in items if i["status"] != "shared"]

    def count(status: str) -> int:
        return sum(1 for i in items if i["status"] == status)

    return ArchiveCompacted(
        source,
        len(items),
        count("compacted"),
        count("already"),
        count("kept_raw"),
        count("shared"),
        count("bad"),
        sum(i["size"] for i in unique),
        sum(i["stored_before"] for i in unique),
        sum(i["stored_after"] for i in unique),
        items,
    )


def verify(
    ctx: Context, source: str | None, progress: OnArchiveProgress | None = None
) -> ArchiveVerified:
    _known(ctx, source)
    items = [i.to_json() for i in ctx.archive.verify(source, _relay(progress))]
    seen: dict[str, dict[str, Any]] = {i["sha256"]: i for i in items}
    ok = sum(1 for i in items if i["ok"])
    return ArchiveVerified(
        source,
        len(items),
        ok,
        len(items) - ok,
        sum(i["size"] for i in seen.values()),
        sum(i["stored_size"] or 0 for i in seen.values()),
        items,
    )
