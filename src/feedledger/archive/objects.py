"""Payload objects in a blob store: raw or compressed (`archive/codec.py`), always
addressed, checked and returned by the ORIGINAL bytes' sha256.

    objects/<sha[:2]>/<sha>        raw bytes (archives written before compression, small
                                   payloads, refused bytes kept for inspection)
    objects/<sha[:2]>/<sha>.zst    a keyframe or a delta against an earlier payload

A payload of a source is written as a delta against the source's latest archived
payload, unless that would make a chain of `keyframe_every` frames: then (and for the
first payload) a standalone keyframe (`keyframe_every` 0: the source's are kept raw).
When the encoder fails (a zstd error, no memory), the payload is stored raw: compressing
is never a reason not to archive.
A reader decompresses at most that many frames, and fewer when it reads a source's
payloads in order (the last one read is kept).

An ingest on a folder archive stores its payload raw first and compresses it in place
after (`archive/settle.py`), as `archive compact` does older raw objects; how a payload
is to be stored is `archive/planning.py`'s.
Raw is looked up before compressed: both write the compressed object (durably) before
they delete the raw one, and never delete a compressed one, so a
reader that misses the raw object always finds the other. Every frame of a chain is
checked against its sha256 as it is decoded: damaged bytes, a missing base or a chain
that loops are a clear error naming the object, never wrong data.

On a folder archive, each source's latest compressed payload is also kept raw in
``cache/base/<source>/<sha256>`` (`archive/basecache.py`): a new process archiving the
source's next payload deltas against it instead of decoding up to `keyframe_every - 1`
frames. It is used only when its bytes hash to its name, it is the source's current
base and its depth and base match the stored object's header; otherwise the chain is
decoded as before. Reads never use it: a read (and `archive verify`) must decode and
check the archived object itself, or damage to it would go unseen. S3 archives have no
such cache (they decode the chain as before).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import xxhash

from feedledger import faults
from feedledger.archive import codec
from feedledger.archive.basecache import BaseCache, CachedBase, PendingBase
from feedledger.archive.blobs import BlobStore
from feedledger.archive.planning import Planned, plan
from feedledger.archive.sidecar import SIDECAR_RE, parse_sidecar_bytes
from feedledger.model.errors import FeedledgerError, NotFoundError

DEFAULT_KEYFRAME_EVERY = 30
# below a file system block, compressing saves nothing on disk: such payloads stay raw
DEFAULT_MIN_SIZE = 4096
MAX_CHAIN = 4096  # a longer chain can only be a damaged (looping) one

KeyframeEvery = Callable[[str], int]


def raw_rel(sha256: str) -> str:
    return f"objects/{sha256[:2]}/{sha256}"


def zst_rel(sha256: str) -> str:
    return f"objects/{sha256[:2]}/{sha256}.zst"


@dataclass(frozen=True)
class Decoded:
    """A payload's bytes, its chain depth (0: raw or a keyframe) and the objects its
    decoding read (itself first, down to a keyframe or a raw object)."""

    data: bytes
    depth: int
    chain: tuple[str, ...]


@dataclass(frozen=True)
class Stored:
    """How an object is stored: `encoding` raw, keyframe or delta; `stored_size` bytes."""

    sha256: str
    encoding: str
    stored_size: int
    base: str | None
    depth: int


class Objects:
    """Read and write payload objects over `blobs` (see the module's docstring)."""

    def __init__(
        self,
        blobs: BlobStore,
        keyframe_every: KeyframeEvery | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
        base_cache: BaseCache | None = None,
    ) -> None:
        self._blobs = blobs
        root = getattr(blobs, "root", None)
        if base_cache is None and isinstance(root, Path):
            base_cache = BaseCache(root / "cache" / "base")
        self.base_cache = base_cache
        self.keyframe_every: KeyframeEvery = keyframe_every or (
            lambda _source: DEFAULT_KEYFRAME_EVERY
        )
        self.min_size = min_size
        self._recent: Decoded | None = None  # the last payload read or written

    # -- reading -----------------------------------------------------------------------

    def exists(self, sha256: str) -> bool:
        return self._blobs.exists(raw_rel(sha256)) or self._blobs.exists(zst_rel(sha256))

    def fetch(self, sha256: str, *, compressed: bool = False) -> tuple[str, bytes] | None:
        """(key, stored bytes) of the object, raw first (`compressed`: only the
        compressed one); None if it is absent."""
        rels = (zst_rel(sha256),) if compressed else (raw_rel(sha256), zst_rel(sha256))
        for rel in rels:
            try:
                stored = self._blobs.read(rel)
            except OSError as exc:
                raise FeedledgerError(
                    f"cannot read archived object {self._blobs.where(rel)}: {exc}"
                ) from exc
            if stored is not None:
                return rel, stored
        return None

    def stored(self, sha256: str) -> Stored | None:
        found = self.fetch(sha256)
        if found is None:
            return None
        rel, stored = found
        if rel == raw_rel(sha256):
            return Stored(sha256, "raw", len(stored), None, 0)
        header, _ = self._parse(rel, stored, sha256)
        kind = "keyframe" if header.base is None else "delta"
        return Stored(sha256, kind, len(stored), header.base, header.depth)

    def read(self, sha256: str) -> bytes:
        return self.decode(sha256).data

    def remember(self, decoded: Decoded) -> None:
        """Keep `decoded` as the last payload read (the base the next read may need)."""
        self._recent = decoded

    def decode(self, sha256: str, *, compressed: bool = False) -> Decoded:
        """The payload's original bytes, checked against its sha256 (`compressed`: its
        compressed object's, even where a raw one is there too).

        The frames below it in its chain are checked by zstd's frame checksums only: a
        wrong base could not make the payload's own sha256 come out right. When that
        final check (or a frame) fails, the chain is decoded again checking every
        frame's sha256, so the error names the object that is damaged."""
        try:
            return self._decode(sha256, compressed, strict=False)
        except NotFoundError:
            raise
        except FeedledgerError:
            return self._decode(sha256, compressed, strict=True)

    def _decode(self, sha256: str, compressed: bool, *, strict: bool) -> Decoded:
        recent = self._recent
        if recent is not None and recent.chain[0] == sha256 and not compressed:
            return recent
        frames: list[tuple[str, str, codec.Header, memoryview]] = []
        current = sha256
        below: Decoded | None = None
        while True:
            if frames and recent is not None and recent.chain[0] == current:
                below = recent  # already checked when it was read or written
                break
            found = self.fetch(current, compressed=compressed and not frames)
            if found is None:
                if not frames:
                    raise NotFoundError(self._blobs.missing(sha256))
                self._corrupt(
                    frames[-1][1],
                    sha256,
                    f"it is a delta against {current}, which is missing from the archive",
                )
            rel, stored = found
            if rel == raw_rel(current):
                if strict or not frames:
                    self._check(rel, stored, current, sha256)
                below = Decoded(stored, 0, (current,))
                if not frames:
                    return below  # a raw object: nothing decoded, nothing kept
                break
            header, frame = self._parse(rel, stored, sha256)
            frames.append((current, rel, header, frame))
            if header.base is None:
                break
            if len(frames) > MAX_CHAIN or any(header.base == f[0] for f in frames):
                self._corrupt(rel, sha256, "its chain of deltas loops")
            current = header.base
        for current, rel, header, frame in reversed(frames):
            try:
                data = codec.decode(header, frame, below.data if below else None)
            except codec.FrameError as exc:
                self._corrupt(rel, sha256, str(exc))
            if strict or current == sha256:
                self._check(rel, data, current, sha256)
            chain = (current, *below.chain) if below else (current,)
            below = Decoded(data, header.depth, chain)
        assert below is not None
        self._recent = below
        return below

    def _parse(self, rel: str, stored: bytes, target: str) -> tuple[codec.Header, memoryview]:
        try:
            header, frame = codec.parse(stored)
        except codec.FrameError as exc:
            self._corrupt(rel, target, str(exc))
        expected = rel.rsplit("/", 1)[1].removesuffix(".zst")
        if header.sha256 != expected:
            self._corrupt(rel, target, f"its header names {header.sha256}")
        return header, frame

    def _check(self, rel: str, data: bytes, sha256: str, target: str) -> None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            self._corrupt(rel, target, f"its bytes hash to {actual}, not {sha256}")

    def _corrupt(self, rel: str, target: str, why: str) -> NoReturn:
        of = "" if rel.rsplit("/", 1)[1].startswith(target) else f" (read for payload {target})"
        raise FeedledgerError(
            f"archived object {self._blobs.where(rel)}{of} is corrupt: {why}",
            hint="restore it from a backup or re-fetch the payload; nothing was applied "
            "from these bytes",
        )

    # -- writing -----------------------------------------------------------------------

    def write(self, sha256: str, data: bytes, source: str | None) -> bool:
        """Store `data` once: a delta or keyframe when `source` is given and that saves
        bytes, else raw. False if the object exists (identical bytes are a no-op)."""
        if self.exists(sha256):
            return False
        pending: PendingBase | None = None  # the cache file the check decodes into
        try:
            try:
                planned = self._plan(sha256, data, source, self._latest(source, sha256))
                if planned is not None:
                    pending = self._begin_cache(source, sha256, data, planned)
                    # one pass: the check leaves the bytes in the cache file it is to be
                    into = None if pending is None else pending.view
                    codec.verify(planned.stored, sha256, data, planned.base, into)
            except (codec.FrameError, MemoryError):
                planned = None  # compressing is never a reason not to archive: raw, then
            faults.point("archive_encoded")
            if planned is None:
                return self._blobs.create(raw_rel(sha256), data)
            created = self._blobs.create(zst_rel(sha256), planned.stored)
            faults.point("archive_object_written")
            written = Decoded(data, planned.depth, (sha256, *planned.chain))
            self._recent = written
            if created and source is not None and self.base_cache is not None:
                # after the object: a kill in between leaves the previous (stale) cache
                if pending is not None:
                    pending.publish()
                    pending = None
                else:
                    cached = CachedBase(data, written.depth, written.chain)
                    self.base_cache.store(source, sha256, cached)
                # the cache holds the bytes now: not kept in memory as well, so a caller
                # that drops the payload once archived (an ingest) frees it (~107 MB at 1M
                # parcels)
                self._recent = None
            return created
        finally:
            if pending is not None:
                pending.discard()

    def base_for(self, source: str, sha256: str) -> CachedBase | Decoded | None:
        """The payload `sha256` of `source` as a base for the next one: its cached bytes
        (`_cached_base`) or its chain decoded; None if it cannot be read (a damaged old
        payload never stops a new one being archived: the new one is a keyframe)."""
        cached = self._cached_base(source, sha256)
        if cached is not None:
            return cached
        try:
            return self.decode(sha256)
        except FeedledgerError:
            return None

    def _begin_cache(
        self, source: str | None, sha256: str, data: bytes, planned: Planned
    ) -> PendingBase | None:
        """The base cache file a new object's check decodes into (`BaseCache.begin`),
        published once the object is stored; None where there is none to make."""
        if source is None or self.base_cache is None or not codec.can_decode_into():
            return None
        chain = (sha256, *planned.chain)
        digest = xxhash.xxh3_128_hexdigest(data)
        return self.base_cache.begin(source, sha256, planned.depth, chain, len(data), digest)

    def encode(
        self, sha256: str, data: bytes, source: str | None, base: CachedBase | Decoded | None
    ) -> tuple[bytes, int, tuple[str, ...]] | None:
        """(stored bytes, depth, base chain) of `data`: a delta against `base` unless the
        chain would reach the source's keyframe interval, else a keyframe; None when it
        is to stay raw (no source, small, or compression saves nothing)."""
        planned = self._plan(sha256, data, source, base)
        if planned is None:
            return None
        # the raw bytes are not kept: what is stored must give them back, checked before
        # it replaces them (an encoder fault then costs bytes on disk, never the payload)
        codec.verify(planned.stored, sha256, data, planned.base)
        return planned.stored, planned.depth, planned.chain

    def _plan(
        self, sha256: str, data: bytes, source: str | None, base: CachedBase | Decoded | None
    ) -> Planned | None:
        every = self.keyframe_every(source) if source is not None else 0
        return plan(sha256, data, every, self.min_size, base)

    def _latest(self, source: str | None, sha256: str) -> CachedBase | Decoded | None:
        """The base for a new payload of `source`: its latest archived payload (by
        publisher timestamp), decoded; None (a keyframe) if there is none or it cannot
        be read (a damaged old payload never stops a new one being archived)."""
        if source is None or self.keyframe_every(source) <= 1:
            return None
        recent = self._recent
        names = [rel for rel in self._blobs.list(f"meta/{source}/") if rel.endswith(".json")]
        for rel in reversed(names):
            name = rel.rsplit("/", 1)[1]
            if SIDECAR_RE.match(name) is None:
                continue
            try:
                raw = self._blobs.read(rel)
                ref = parse_sidecar_bytes(raw or b"", name=name, parent=source)
            except (OSError, ValueError, FeedledgerError):
                continue
            if ref.sha256 == sha256:
                continue
            if recent is not None and recent.chain[0] == ref.sha256:
                return recent
            return self.base_for(source, ref.sha256)
        return None

    def _cached_base(self, source: str, sha256: str) -> CachedBase | None:
        """The cached bytes of the source's current base `sha256`, if the cache holds
        them (checked against their sha256) and agrees with the stored object's header
        (depth and base); else None (the caller decodes the chain)."""
        if self.base_cache is None:
            return None
        cached = self.base_cache.load(source, sha256)
        if cached is None:
            return None
        try:
            stored = self.stored(sha256)
        except FeedledgerError:
            return None
        if stored is None or stored.depth != cached.depth:
            return None
        if stored.base != (cached.chain[1] if len(cached.chain) > 1 else None):
            return None
        return cached
