"""`archive compact` and `archive verify`: converting raw payload objects to compressed
ones in place, and re-reading every payload against its sha256.

Compact goes through each source's payloads in publisher order, each one compressed
against the one before (a keyframe every K), and is crash-safe: the compressed object
is created (written to a temporary name, fsync'd, linked into place: it appears whole or
not at all), decoded back and checked against the sha256, and only then is the raw one
deleted. A kill at any point leaves every payload readable (readers look for the raw
object first, then the compressed one, which is never deleted); running compact again
finishes the job (a compressed object already there is checked, then the raw one goes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from feedledger import faults
from feedledger.archive import codec
from feedledger.archive.blobs import BlobStore
from feedledger.archive.objects import Decoded, Objects, raw_rel, zst_rel
from feedledger.model.errors import FeedledgerError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import iso

# (payloads done, payloads in all, the payload just done or None at the start)
Progress = Callable[[int, int, PayloadRef | None], None]


@dataclass(frozen=True)
class CompactItem:
    """One payload of `archive compact`: its object's bytes before and after, and what
    happened (`compacted`, `already` compressed, `kept_raw`: compressing saved nothing,
    `shared`: another payload's identical bytes, `bad`: unreadable, left as it was)."""

    ref: PayloadRef
    status: str
    encoding: str
    before: int
    after: int
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.ref.source,
            "payload_id": self.ref.payload_id,
            "published_at": iso(self.ref.published_at),
            "sha256": self.ref.sha256,
            "size": self.ref.size,
            "status": self.status,
            "encoding": self.encoding,
            "stored_before": self.before,
            "stored_after": self.after,
            "error": self.error,
        }


@dataclass(frozen=True)
class VerifyItem:
    """One payload of `archive verify`: read back whole (every frame of its chain
    decompressed) and its sha256 recomputed; `error` says why not when `ok` is False."""

    ref: PayloadRef
    ok: bool
    encoding: str | None
    stored_size: int | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.ref.source,
            "payload_id": self.ref.payload_id,
            "published_at": iso(self.ref.published_at),
            "sha256": self.ref.sha256,
            "size": self.ref.size,
            "ok": self.ok,
            "encoding": self.encoding,
            "stored_size": self.stored_size,
            "error": self.error,
        }


def _ordered(refs: list[PayloadRef]) -> list[PayloadRef]:
    return sorted(refs, key=lambda r: (r.source, r.published_at, r.payload_id))


def compact(
    objects: Objects, blobs: BlobStore, refs: list[PayloadRef], progress: Progress | None
) -> list[CompactItem]:
    """Compress the raw objects of `refs` in place (see the module's docstring)."""
    refs = _ordered(refs)
    items: list[CompactItem] = []
    seen: dict[str, CompactItem] = {}
    if progress:
        progress(0, len(refs), None)
    for _, group in itertools.groupby(refs, key=lambda r: r.source):
        previous: Decoded | None = None
        for ref in group:
            if ref.sha256 in seen:
                first = seen[ref.sha256]
                items.append(CompactItem(ref, "shared", first.encoding, first.after, first.after))
            else:
                item, decoded = _compact_one(objects, blobs, ref, previous, len(items) + 1)
                previous = decoded or previous
                seen[ref.sha256] = item
                items.append(item)
                faults.point("after_compact", len(items))
            if progress:
                progress(len(items), len(refs), ref)
    return items


def _compact_one(
    objects: Objects, blobs: BlobStore, ref: PayloadRef, previous: Decoded | None, n: int
) -> tuple[CompactItem, Decoded | None]:
    sha = ref.sha256
    try:
        stored = objects.stored(sha)
        if stored is None:
            raise FeedledgerError(blobs.missing(sha))
        decoded = objects.decode(sha)
    except FeedledgerError as exc:
        return CompactItem(ref, "bad", "unknown", 0, 0, str(exc)), None
    if stored.encoding != "raw":
        return CompactItem(ref, "already", stored.encoding, *(stored.stored_size,) * 2), decoded
    try:
        encoded = objects.encode(sha, decoded.data, ref.source, previous)
    except (codec.FrameError, MemoryError):
        encoded = None  # the encoder failed or gave back other bytes: it stays raw
    if encoded is None:
        return CompactItem(ref, "kept_raw", "raw", *(stored.stored_size,) * 2), decoded
    data = encoded[0]
    with blobs.writing():
        # a compact killed after this create finds it there: it is checked all the same
        blobs.create(zst_rel(sha), data)
        faults.point("compact_written", n)
        if previous is not None:
            objects.remember(previous)
        try:
            check = objects.decode(sha, compressed=True)
        except FeedledgerError as exc:
            size = stored.stored_size
            return CompactItem(ref, "bad", "raw", size, size, str(exc)), None
        blobs.delete(raw_rel(sha))
        faults.point("compact_deleted", n)
    after = objects.stored(sha)
    encoding = after.encoding if after else "unknown"
    size = after.stored_size if after else len(data)
    return CompactItem(ref, "compacted", encoding, stored.stored_size, size), check


def verify(objects: Objects, refs: list[PayloadRef], progress: Progress | None) -> list[VerifyItem]:
    """Read back every payload of `refs` whole and check its sha256."""
    refs = _ordered(refs)
    items: list[VerifyItem] = []
    if progress:
        progress(0, len(refs), None)
    for ref in refs:
        encoding: str | None = None
        size: int | None = None
        try:
            stored = objects.stored(ref.sha256)
            if stored is not None:
                encoding, size = stored.encoding, stored.stored_size
            objects.decode(ref.sha256)
            items.append(VerifyItem(ref, True, encoding, size))
        except FeedledgerError as exc:
            items.append(VerifyItem(ref, False, encoding, size, str(exc)))
        if progress:
            progress(len(items), len(refs), ref)
    return items
