"""The archive's rules, written once over a blob store (`archive/blobs.py`): content
address, write-once, one sidecar per publication, rival payloads of one publisher
timestamp, refused bytes and their notes, listings, and verify-on-read.

Layout under the store's root (a folder, or an S3 bucket's prefix)::

    objects/<sha[:2]>/<sha>[.zst]                             payload bytes: raw, or
                                                              compressed (archive/objects.py)
    meta/<source>/<published_at_us:020d>-<payload_id>.json     accepted sidecars
    rejected/<source>/<published_at_us:020d>-<payload_id>.json refused (ambiguous) sidecars
    rejected/<source>/<sha[:16]>-<reason hash>.json           notes on unusable bytes
    rejected/_unfiled/<sha[:16]>-<reason hash>.json           ... whose source is unknown
    claims/<source>/<published_at_us:020d>.json               who holds a publication slot
                                                              (stores without locks only)

Archive first: a payload's bytes are stored before any sidecar or claim names them.
Nothing is ever overwritten. One publisher timestamp of a source (a slot) holds one
payload, first come, first served: identical bytes again are a no-op returning the
archived ref; different bytes are kept under ``rejected/`` and refused with
AmbiguousPayloadError. Where the store can lock the source's sidecar folder, a look at
the slot's sidecars under the lock decides. Where it cannot (S3), the slot's claim
decides: a create-once that exactly one writer wins, holding the winner's sidecar, which
the winner, or whoever finds the claim without it (say after a crash), then writes under
``meta/``. The slot's sidecars are listed before claiming, so an archive copied from a
folder (sidecars, no claims) is obeyed too.
"""

from __future__ import annotations

import builtins
import hashlib
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from feedledger.archive import maintain
from feedledger.archive.blobs import BlobStore
from feedledger.archive.objects import DEFAULT_MIN_SIZE, KeyframeEvery, Objects, raw_rel
from feedledger.archive.rejected import RejectedPayload, note_folder
from feedledger.archive.rejected import listed as listed_rejected
from feedledger.archive.rejected import note as rejected_note
from feedledger.archive.settle import never_failing, settle, settle_file
from feedledger.archive.sidecar import (
    SHA_RE,
    SIDECAR_RE,
    ambiguous,
    check_source,
    new_ref,
    parse_sidecar_bytes,
    sidecar_bytes,
    sidecar_name,
)
from feedledger.model.errors import FeedledgerError, NotFoundError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import now_us

if TYPE_CHECKING:
    from pathlib import Path

    from feedledger.archive.maintain import CompactItem, Progress, VerifyItem


def object_rel(sha256: str) -> str:
    """The key of the object with this sha256 stored raw (compressed: `.zst` added)."""
    return raw_rel(sha256)


class BlobArchive:
    """Write-once, content-addressed payload store over a blob store. A source's
    payloads are stored compressed, each against the previous one, with a standalone
    keyframe every `keyframe_every(source)` payloads (`archive/objects.py`)."""

    def __init__(
        self,
        blobs: BlobStore,
        *,
        keyframe_every: KeyframeEvery | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
    ) -> None:
        self._blobs = blobs
        self.objects = Objects(blobs, keyframe_every, min_size)

    def prepare(self) -> None:
        """Make the archive usable (`feedledger init`): create its folder, or check the
        bucket answers and takes conditional writes (buckets are never created)."""
        self._blobs.prepare()

    # -- writing -----------------------------------------------------------------------

    def put(
        self,
        source: str,
        data: bytes,
        *,
        published_at: int,
        fetched_at: int,
        original_name: str | None = None,
        content_type: str | None = None,
        sha256: str | None = None,
        metadata: dict[str, Any] | None = None,
        size: int | None = None,
    ) -> tuple[PayloadRef, bool]:
        """Archive `data` for `source`; returns (ref, created). `sha256` may be given when
        the caller already stored the bytes with `put_object` (it is trusted), and then
        `size` instead of the bytes (`data` empty) when it stored them from their file
        (`LocalArchive.commit`: the object must exist);
        `metadata` (a portal connector's, JSON-able) is recorded in the sidecar.

        `created` is False when this exact publication (source, published_at, bytes)
        is already archived; the existing ref (with its original `fetched_at`) is
        returned. Different bytes claiming the same publisher timestamp are kept under
        `rejected/` for inspection and refused with AmbiguousPayloadError.
        """
        ref = new_ref(
            source,
            data,
            published_at=published_at,
            fetched_at=fetched_at,
            original_name=original_name,
            content_type=content_type,
            sha256=sha256,
            size=size,
        )
        blobs = self._blobs
        with blobs.writing():
            blobs.connect()
            # Archive first: the bytes are durable before any sidecar or claim names them.
            if size is None:
                self._write_object(ref.sha256, data, source)
            elif sha256 is None or not self.objects.exists(sha256):
                raise FeedledgerError(
                    f"payload object {self._blobs.where(raw_rel(str(sha256)))} is missing",
                    source=source,
                    hint="it was stored from its file a moment ago: run the ingest again",
                )
            accepted = f"meta/{source}/{sidecar_name(published_at, ref.payload_id)}"
            with blobs.slot(f"meta/{source}") as exclusive:
                slot = blobs.list(f"meta/{source}/{published_at:020d}-")
                present = [rel for rel in slot if rel.endswith(".json")]
                if accepted in present:
                    return self._existing(accepted, source), False
                if present:
                    self._refuse(ref, [rel.rsplit("/", 1)[1][21:-5] for rel in present])
                if not exclusive:
                    return self._claim(ref, accepted, sidecar_bytes(ref, metadata))
                if not blobs.create(accepted, sidecar_bytes(ref, metadata)):
                    # Only possible without advisory locks: another process won the race.
                    return self._existing(accepted, source), False
            return ref, True

    def _claim(self, ref: PayloadRef, accepted: str, sidecar: bytes) -> tuple[PayloadRef, bool]:
        """Settle the slot of `ref` without a lock: its claim's one winner holds it."""
        claim = f"claims/{ref.source}/{ref.published_at:020d}.json"
        if self._blobs.create(claim, sidecar):
            self._blobs.create(accepted, sidecar)  # a twin may have: same bytes
            return ref, True
        holder, raw = self._claim_holder(claim, ref)
        # The claim decided; make sure its sidecar exists (its writer may have stopped):
        # the claim's own bytes, which are its sidecar's
        self._blobs.create(
            f"meta/{ref.source}/{sidecar_name(ref.published_at, holder.payload_id)}", raw
        )
        if holder.payload_id != ref.payload_id:
            self._refuse(ref, [holder.payload_id])
        return holder, False

    def _claim_holder(self, claim: str, ref: PayloadRef) -> tuple[PayloadRef, bytes]:
        try:
            raw = self._blobs.read(claim)
            if raw is None:
                raise ValueError("it vanished while being read")
            holder = parse_sidecar_bytes(raw, name=None, parent=ref.source)
            if holder.published_at != ref.published_at:
                raise ValueError(f"it claims published_at {holder.published_at}")
        except (OSError, ValueError) as exc:
            raise FeedledgerError(
                f"archive claim {self._blobs.where(claim)} is damaged: {exc}",
                source=ref.source,
                hint="inspect or restore it; the archive never rewrites it",
            ) from exc
        return holder, raw

    def _refuse(self, ref: PayloadRef, rival_ids: builtins.list[str]) -> NoReturn:
        rejected = f"rejected/{ref.source}/{sidecar_name(ref.published_at, ref.payload_id)}"
        self._blobs.create(rejected, sidecar_bytes(ref))
        raise ambiguous(ref, rival_ids, self._blobs.where(rejected))

    def _existing(self, rel: str, source: str) -> PayloadRef:
        try:
            try:
                raw = self._blobs.read(rel)
            except OSError as exc:
                raise ValueError(f"cannot read it: {exc}") from exc
            if raw is None:
                raise ValueError("it vanished while being read")
            return parse_sidecar_bytes(raw, name=rel.rsplit("/", 1)[1], parent=source)
        except ValueError as exc:
            raise FeedledgerError(
                f"archive sidecar {self._blobs.where(rel)} is damaged: {exc}",
                source=source,
                hint="inspect or restore the file; the archive never rewrites it",
            ) from exc

    def _write_object(self, sha: str, data: bytes, source: str | None) -> bool:
        """Identical bytes are stored once; a source's are compressed (None: raw)."""
        return self.objects.write(sha, data, source)

    def put_object(self, data: bytes, source: str | None = None, *, later: bool = False) -> str:
        """Store the bytes alone (content-addressed, durable); returns their sha256.
        Naming them as a publication is `put`'s job, once they are known to be usable;
        `source`: whose payload they are to be (compressed against its latest one).
        `later`: on a folder archive, stored raw now, to be compressed by `settle` once
        they are the source's publication (an object store compresses them now: there
        the upload of the raw bytes would cost more than compressing them)."""
        sha = hashlib.sha256(data).hexdigest()
        with self._blobs.writing():
            self._blobs.connect()
            raw_first = later and self.objects.base_cache is not None
            self._write_object(sha, data, None if raw_first else source)
        return sha

    def settle(self, source: str, sha256: str, published_at: int) -> list[str]:
        """Compress the publication `sha256` of `source` stored raw by `put_object(...,
        later=True)`, from its file, and the raw ones a killed ingest left before it
        (`archive/settle.py`); returns the sha256s compressed. Never raises: what cannot
        be compressed stays raw, a valid object (a warning says why)."""
        if self.objects.base_cache is None or self._raw_file(sha256) is None:
            return []  # an object store: `put_object` compressed the payload already
        # its own Objects: this runs beside the caller's other archive work
        objects = Objects(
            self._blobs,
            self.objects.keyframe_every,
            self.objects.min_size,
            self.objects.base_cache,
        )

        def work() -> list[str]:
            with self._blobs.writing():
                return settle(objects, self._blobs, source, sha256, published_at, self._path_of_raw)

        return never_failing(source, sha256, work)

    def settle_streamed(self, source: str, sha256: str) -> list[str]:
        """`settle` for a payload too large to hold whole beside a base (a source's
        `memory_budget`): its raw object compressed as a keyframe streamed from its file
        (`archive/settle.settle_file`), without a base. Never raises: what cannot be
        compressed stays raw (a warning says why)."""
        path = self._raw_file(sha256)
        if self.objects.base_cache is None or path is None:
            return []  # an object store: `put_object` compressed the payload already

        def work() -> list[str]:
            with self._blobs.writing():
                done = settle_file(self.objects, self._blobs, source, sha256, path)
            return [sha256] if done else []

        return never_failing(source, sha256, work)

    def _path_of_raw(self, sha256: str) -> Path:
        path = self._raw_file(sha256)
        assert path is not None  # only a store with files settles
        return path

    def _raw_file(self, sha256: str) -> Path | None:
        """The file of the object `sha256` stored raw, where the store has files."""
        return None

    def keep_rejected(
        self,
        source: str,
        data: bytes,
        *,
        original_name: str | None = None,
        reason: str = "",
        filed: bool = True,
    ) -> str:
        """Keep bytes that could not be archived as a publication (unreadable, no usable
        publisher date, unknown source...) for inspection: the object is stored
        content-addressed and a note is written under `rejected/<source>/` (`filed`: the
        source is known) or `rejected/_unfiled/`. Never raises for a bad name. Returns
        where the bytes are (the object's path or URL), for the refusal message."""
        sha = hashlib.sha256(data).hexdigest()
        with self._blobs.writing():
            self._blobs.connect()
            # raw, for inspection (an ingest may have stored them compressed already)
            if not self._blobs.exists(object_rel(sha)):
                self._blobs.create(object_rel(sha), data)
            name, note = rejected_note(source, sha, len(data), original_name, reason, now_us())
            self._blobs.create(f"rejected/{note_folder(source, filed=filed)}/{name}", note)
        return self._blobs.where(object_rel(sha))

    def compact(
        self, source: str | None = None, progress: Progress | None = None
    ) -> builtins.list[CompactItem]:
        """Compress the raw objects of the accepted payloads (of `source`, or all) in
        place, crash-safe (`archive/maintain.py`); one item per payload."""
        refs = self.scan(source)
        with self._blobs.writing():
            return maintain.compact(self.objects, self._blobs, refs, progress)

    def verify(
        self, source: str | None = None, progress: Progress | None = None
    ) -> builtins.list[VerifyItem]:
        """Read back every accepted payload (of `source`, or all) and check its sha256."""
        return maintain.verify(self.objects, self.scan(source), progress)

    # -- reading -----------------------------------------------------------------------

    def has(self, sha256: str) -> bool:
        if not SHA_RE.match(sha256):
            return False
        self._blobs.connect()
        return self.objects.exists(sha256)

    def get(self, sha256: str) -> bytes:
        """The object's original bytes (decompressed), verified against their hash."""
        if not SHA_RE.match(sha256):
            raise NotFoundError(f"{sha256!r} is not a sha256 hex digest (64 lowercase hex digits)")
        self._blobs.connect()
        return self.objects.read(sha256)

    def _load(
        self, rels: Iterable[str], start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        """The accepted sidecars among `rels` (``meta/<source>/<name>``) in the window,
        by (published_at, payload_id). Unreadable ones are skipped with a warning."""
        where = self._blobs.where
        wanted: builtins.list[tuple[str, str, str]] = []
        for rel in rels:
            parts = rel.split("/")
            if len(parts) != 3 or not parts[2].endswith(".json") or parts[2].startswith("."):
                continue
            match = SIDECAR_RE.match(parts[2])
            if match is None:
                warnings.warn(
                    f"skipping archive sidecar {where(rel)}: unexpected file name", stacklevel=3
                )
                continue
            ts = int(match["ts"])
            if (start_us is not None and ts < start_us) or (end_us is not None and ts > end_us):
                continue
            wanted.append((rel, parts[1], parts[2]))
        contents = self._blobs.read_many([rel for rel, _, _ in wanted])
        refs: builtins.list[PayloadRef] = []
        for rel, parent, name in wanted:
            raw = contents[rel]
            if raw is None:
                continue  # deleted since the listing
            try:
                if isinstance(raw, OSError):
                    raise ValueError(f"cannot read it: {raw}")
                refs.append(parse_sidecar_bytes(raw, name=name, parent=parent))
            except ValueError as exc:
                warnings.warn(f"skipping archive sidecar {where(rel)}: {exc}", stacklevel=3)
        refs.sort(key=lambda r: (r.published_at, r.payload_id))
        return refs

    def scan(self, source: str | None = None) -> builtins.list[PayloadRef]:
        """All accepted payloads (of one source, or all), by (published_at, payload_id)."""
        if source is not None:
            check_source(source)
        self._blobs.connect()
        return self._load(self._blobs.list(f"meta/{source}/" if source else "meta/"))

    def list(
        self, source: str, start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        """Accepted payloads of `source` with start_us <= published_at <= end_us, in order.
        Sidecar names sort by time, so only the window is listed and read."""
        check_source(source)
        self._blobs.connect()
        base = f"meta/{source}/"
        after = f"{base}{start_us:020d}" if start_us is not None and start_us > 0 else None

        def window() -> Iterator[str]:
            for rel in self._blobs.list(base, after):
                match = SIDECAR_RE.match(rel[len(base) :])
                if match is not None and end_us is not None and int(match["ts"]) > end_us:
                    return
                yield rel

        return self._load(window(), start_us, end_us)

    def rejected(self, source: str) -> builtins.list[RejectedPayload]:
        """Refused payloads of `source` (filed under it, or unfiled notes naming it),
        oldest refusal first. Unreadable notes are skipped with a warning."""
        check_source(source)
        self._blobs.connect()
        return listed_rejected(self._blobs, source, object_rel)
