"""Compressing after the commit: an ingest stores its payload's object raw (sha256,
write, fsync: durable before the ledger sees the payload, invariant 1), and compresses
it once the payload is archived under its source, beside the payload's transaction
(`pipeline/ingest.py`), instead of delta-encoding and checking it on the parse's
critical path.

`settle` compresses the payload against the source's payload before it, and first any
of that payload's raw predecessors a kill left between the two steps (at most `BEHIND`
of them, oldest first, each against the one before): a later ingest of the source
finishes what a killed one started, as does `archive compact`. Until then the raw
object is a valid payload object like any other (`archive verify` reads it, every
reader looks for the raw object first).

Where compressing fails (a zstd error, no memory, a damaged base) the object stays raw:
compressing is never a reason for an ingest to fail once its payload is applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from feedledger import faults
from feedledger.archive import codec
from feedledger.archive.basecache import CachedBase
from feedledger.archive.blobs import BlobStore
from feedledger.archive.objects import Decoded, Objects, raw_rel, zst_rel
from feedledger.archive.sidecar import SIDECAR_RE, parse_sidecar_bytes
from feedledger.model.errors import FeedledgerError

# raw predecessors (a killed ingest's) a later ingest compresses before its own payload
BEHIND = 2


def settle(
    objects: Objects, blobs: BlobStore, source: str, sha256: str, data: bytes, published_at: int
) -> list[str]:
    """Compress the payload `sha256` (bytes `data`, published at `published_at`) of
    `source`, stored raw, and the raw predecessors a kill left (see the module doc).
    Returns the sha256s of the objects compressed, oldest first."""
    faults.point("before_settle")
    done: list[str] = []
    if objects.keyframe_every(source) < 1:
        return done  # this source's payloads are stored raw
    leftovers, base_sha = _raw_before(blobs, source, published_at, sha256)
    base: CachedBase | Decoded | None = None
    if base_sha is not None:
        base = objects.base_for(source, base_sha)
    for sha in leftovers:
        try:
            earlier = objects.decode(sha)  # the raw object, checked against its sha256
        except FeedledgerError:
            base = None  # unreadable: left as it is; the next one is a keyframe
            continue
        base = _one(objects, done, sha, earlier.data, source, base) or earlier
    _one(objects, done, sha256, data, source, base)
    return done


def settle_file(objects: Objects, blobs: BlobStore, source: str, sha256: str, path: Path) -> bool:
    """Compress the payload `sha256` of `source`, stored raw at `path`, as a keyframe
    streamed from that file (`codec.encode_keyframe_from`): for a payload too large to
    hold whole beside its base (a source's `memory_budget`). Its raw predecessors are
    left for a later `settle` or `archive compact`, and the base cache is not made this
    payload's (its next payload is too large for a delta against it as well). Returns
    whether it was compressed (what fails leaves the raw object, valid)."""
    faults.point("before_settle")
    raw = raw_rel(sha256)
    if objects.keyframe_every(source) < 1 or not blobs.exists(raw):
        return False
    size = path.stat().st_size
    if size < objects.min_size or blobs.exists(zst_rel(sha256)):
        return False  # small: `settle`'s case; both there: `archive compact` finishes it
    try:
        stored = codec.encode_keyframe_from(path, sha256, size)
        if codec.keyframe_digest(stored) != (sha256, size) or len(stored) >= size:
            return False  # the encoder gave back other bytes, or saved nothing
    except (codec.FrameError, MemoryError):
        return False
    blobs.create(zst_rel(sha256), stored)
    faults.point("settle_written")
    blobs.delete(raw)
    return True


def _one(
    objects: Objects,
    done: list[str],
    sha256: str,
    data: bytes,
    source: str,
    base: CachedBase | Decoded | None,
) -> Decoded | None:
    written = objects.compress(sha256, data, source, base)
    if written is not None:
        done.append(sha256)
    return written


def _raw_before(
    blobs: BlobStore, source: str, published_at: int, sha256: str
) -> tuple[list[str], str | None]:
    """The source's payloads before `published_at` whose object is raw, back from the
    latest (at most `BEHIND`, returned oldest first), and the payload before those (the
    base; None if there is none)."""
    leftovers: list[str] = []
    for sha in _earlier(blobs, source, published_at):
        if sha == sha256 or sha in leftovers:
            continue
        if len(leftovers) < BEHIND and blobs.exists(raw_rel(sha)):
            leftovers.append(sha)
            continue
        return leftovers[::-1], sha
    return leftovers[::-1], None


def _earlier(blobs: BlobStore, source: str, published_at: int) -> Iterator[str]:
    """The sha256s of the source's accepted payloads published before `published_at`,
    latest first (unreadable sidecars skipped)."""
    folder = f"meta/{source}/"
    before = f"{folder}{published_at:020d}"
    names = [rel for rel in blobs.list(folder) if rel.endswith(".json") and rel < before]
    for rel in reversed(names):
        name = rel.rsplit("/", 1)[1]
        if SIDECAR_RE.match(name) is None:
            continue
        try:
            raw = blobs.read(rel)
            yield parse_sidecar_bytes(raw or b"", name=name, parent=source).sha256
        except (OSError, ValueError, FeedledgerError):
            continue
