"""Compressing after the commit: an ingest stores its payload's object raw (sha256,
write, fsync: durable before the ledger sees the payload, invariant 1), and compresses
it once the payload is archived under its source, beside the payload's transaction
(`pipeline/intake/ingest.py`), instead of delta-encoding and checking it on the parse's
critical path.

`settle` compresses the payload against the source's payload before it, and first any
of that payload's raw predecessors a kill left between the two steps (at most `BEHIND`
of them, oldest first, each against the one before): a later ingest of the source
finishes what a killed one started, as does `archive compact`. Until then the raw
object is a valid payload object like any other (`archive verify` reads it, every
reader looks for the raw object first).

`compress` works from the raw FILE, never the payload's bytes in memory: it is encoded
from the file mapped a chunk at a time against the base (the previous payload's cache
file, mapped), and checked by decoding it into the source's next base cache file
(`archive/streaming.py`), the pages behind each step handed back to the kernel. So a
settle holds the base's mapping and O(chunk), not the payload twice (~200 MiB of a 1M
daily's peak, bench/README.md). The check compares what the object decodes to with what
the encoder read from the raw file, through their XXH3-128 (computed as each was read or
written: a sha256 of the payload again cost 0.08 CPU s at 1M); the raw file is the bytes
whose sha256 named it, written and fsync'd before the payload was archived. Then the
object is created (fsync'd), the raw one deleted, the cache file published: a kill at
any point leaves the payload readable, raw, compressed, or both (readers look for the raw
one first). Without zstd's CFFI backend the payload is read whole (checked against its
sha256) and compressed in memory.

Where compressing fails (a zstd error, no memory, a damaged base) the object stays raw:
compressing is never a reason for an ingest to fail once its payload is applied.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from feedledger import faults
from feedledger.archive import codec, streaming
from feedledger.archive.basecache import CachedBase, PendingBase
from feedledger.archive.blobs import BlobStore
from feedledger.archive.objects import Decoded, Objects, raw_rel, zst_rel
from feedledger.archive.planning import Base, delta_of, plan
from feedledger.archive.sidecar import SIDECAR_RE, parse_sidecar_bytes
from feedledger.model.errors import FeedledgerError

# raw predecessors (a killed ingest's) a later ingest compresses before its own payload
BEHIND = 2

PathOf = Callable[[str], Path]


def settle(
    objects: Objects, blobs: BlobStore, source: str, sha256: str, published_at: int, path_of: PathOf
) -> list[str]:
    """Compress the payload `sha256` (published at `published_at`) of `source`, stored
    raw at `path_of(sha256)`, and the raw predecessors a kill left (see the module doc).
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
        if compress(objects, blobs, source, sha, base, path_of(sha)):
            done.append(sha)
        # the payload as the next one's base: its new cache file, else decoded (a raw
        # object is checked against its sha256); unreadable: the next one is a keyframe
        base = objects.base_for(source, sha)
    if compress(objects, blobs, source, sha256, base, path_of(sha256)):
        done.append(sha256)
    return done


def compress(
    objects: Objects,
    blobs: BlobStore,
    source: str,
    sha256: str,
    base: CachedBase | Decoded | None,
    path: Path,
) -> bool:
    """Compress in place the object `sha256` of `source` stored raw at `path`, a delta
    against `base` (the source's payload before it) or a keyframe, and make the
    source's base cache this payload's (see the module doc). Whether it was: False
    when there is no raw object, or it stays raw (small, compression saves nothing,
    the encoder failed)."""
    raw = raw_rel(sha256)
    if not blobs.exists(raw):
        return False
    if blobs.exists(zst_rel(sha256)):
        # killed between the two steps: the compressed object is checked, then the
        # raw one goes (a damaged compressed one keeps the raw one)
        try:
            objects.decode(sha256, compressed=True)
        except FeedledgerError:
            return False
        blobs.delete(raw)
        return True
    every = objects.keyframe_every(source)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False  # compressed (and deleted) by another process since the look above
    if every < 1 or size < objects.min_size:
        return False
    if not codec.can_decode_into():
        return _in_memory(objects, blobs, source, sha256, base)
    against = delta_of(base, sha256, size, every)
    depth = 0 if against is None else against.depth + 1
    chain = () if against is None else against.chain
    pending: PendingBase | None = None
    try:
        try:
            if against is None:
                stored, read = streaming.encode_from(path, sha256, size)
            else:
                stored, read = streaming.encode_from(
                    path, sha256, size, against.data, against.chain[0], depth
                )
            if len(stored) >= size:
                return False  # compressing saves nothing
            if objects.base_cache is not None:
                pending = objects.base_cache.begin(source, sha256, depth, (sha256, *chain), size)
            checked = _checked(stored, read, against, pending, size)
        except (codec.FrameError, MemoryError):
            return False  # the encoder failed or gave back other bytes: it stays raw
        except FileNotFoundError:
            return False  # compressed by another process since (its object is checked)
        blobs.create(zst_rel(sha256), stored)
        faults.point("settle_written")
        blobs.delete(raw)
        if pending is not None:
            pending.publish(checked[0])
            pending = None
        elif objects.base_cache is not None and checked[1] is not None:
            cached = CachedBase(checked[1], depth, (sha256, *chain))
            objects.base_cache.store(source, sha256, cached)
        return True
    finally:
        if pending is not None:
            pending.discard()


def _checked(
    stored: bytes, read: str, against: Base | None, pending: PendingBase | None, size: int
) -> tuple[str, memoryview | None]:
    """Decode `stored` into the pending cache file (or, where there is none, a buffer of
    its own, returned) and check it gives back the bytes the encoder read (their
    XXH3-128 `read`, also the cache file's header's). FrameError if it does not."""
    base = None if against is None else against.data
    if pending is not None:

        def released(done: int) -> None:
            faults.point("settle_checking")  # the cache file part written, the raw one kept
            pending.release(done)

        digest = streaming.decode_into(stored, base, pending.view, released)
        own = None
    else:
        own = memoryview(bytearray(size))
        digest = streaming.decode_into(stored, base, own)
    if digest != read:
        raise codec.FrameError("the encoded frame does not decode to the payload's bytes")
    return digest, own


def _in_memory(
    objects: Objects,
    blobs: BlobStore,
    source: str,
    sha256: str,
    base: CachedBase | Decoded | None,
) -> bool:
    """`compress` without the CFFI backend: the raw object read whole (checked against
    its sha256), encoded and checked in memory."""
    try:
        data = objects.decode(sha256).data
        planned = plan(sha256, data, objects.keyframe_every(source), objects.min_size, base)
        if planned is None:
            return False
        codec.verify(planned.stored, sha256, data, planned.base)
    except (FeedledgerError, codec.FrameError, MemoryError):
        return False
    blobs.create(zst_rel(sha256), planned.stored)
    faults.point("settle_written")
    blobs.delete(raw_rel(sha256))
    if objects.base_cache is not None:
        chain = (sha256, *planned.chain)
        objects.base_cache.store(source, sha256, CachedBase(data, planned.depth, chain))
    return True


def settle_file(objects: Objects, blobs: BlobStore, source: str, sha256: str, path: Path) -> bool:
    """Compress the payload `sha256` of `source`, stored raw at `path`, as a keyframe
    streamed from that file (`streaming.encode_keyframe_from`): for a payload too large
    to hold whole beside its base (a source's `memory_budget`). Its raw predecessors are
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
        stored = streaming.encode_keyframe_from(path, sha256, size)
        if streaming.keyframe_digest(stored) != (sha256, size) or len(stored) >= size:
            return False  # the encoder gave back other bytes, or saved nothing
    except (codec.FrameError, MemoryError):
        return False
    blobs.create(zst_rel(sha256), stored)
    faults.point("settle_written")
    blobs.delete(raw)
    return True


def never_failing(source: str, sha256: str, work: Callable[[], list[str]]) -> list[str]:
    """`work`'s result, or [] with a warning where it fails: the payload is archived and
    applied, so it stays raw, a valid object (`archive compact` retries)."""
    try:
        return work()
    except faults.InjectedFailure:
        raise  # a crash test's
    except Exception as exc:
        warnings.warn(
            f"payload object {sha256} of {source} stays raw in the archive (valid; "
            f"`archive compact` retries): compressing it failed: {exc}",
            stacklevel=3,
        )
        return []


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
