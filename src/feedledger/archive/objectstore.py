"""Content-addressed, write-once payload store on S3-compatible object storage (AWS S3,
MinIO, Ceph, R2, moto...) through s3fs, for workers on several machines.

Location ``s3://bucket/prefix``; under the prefix, the local archive's layout::

    objects/<sha[:2]>/<sha>                                    payload bytes
    meta/<source>/<published_at_us:020d>-<payload_id>.json     accepted sidecars
    rejected/<source>/<published_at_us:020d>-<payload_id>.json refused (ambiguous) sidecars
    rejected/<source>/<sha[:16]>-<reason hash>.json            notes on unusable bytes
    rejected/_unfiled/<sha[:16]>-<reason hash>.json            ... whose source is unknown
    claims/<source>/<published_at_us:020d>.json                who holds a publication slot
    claims/.conditional-write-probe                            (empty) see below

Write-once: every key is created by a conditional put (``If-None-Match: *``), which the
store refuses (412) when the key exists, so nothing is ever overwritten, even by workers
racing. Payload bytes are looked up first (HEAD), so identical bytes are not uploaded
twice. The first write of a process checks that the store honours the condition; where
it does not (some older S3-compatible servers), a warning says so and the archive falls
back to an existence check before each write, which cannot stop two workers racing.

No locks on S3, so two payloads claiming one publisher timestamp of a source are settled
by the slot's claim, ``claims/<source>/<ts>.json``: a conditional put that exactly one
writer wins (first come, first served, as with the local archive's lock). The claim
holds the winner's sidecar, which the winner, or whoever finds the claim without it
(say after a crash), then writes under ``meta/``. A loser keeps its sidecar under
``rejected/`` and gets AmbiguousPayloadError. The slot's sidecars are listed before
claiming, so an archive copied from a local folder (sidecars, no claims) is obeyed too.

Credentials come only from the standard AWS chain (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE, shared files, instance roles), never from
feedledger.toml. A non-AWS endpoint comes from AWS_ENDPOINT_URL_S3, else
AWS_ENDPOINT_URL, else ``[archive] endpoint_url``; botocore reads the two variables
itself, but the archive resolves them too and passes the endpoint explicitly, so the
TOML setting works and errors name it. s3fs is imported on first use, not at start-up.
"""

from __future__ import annotations

import builtins
import hashlib
import warnings
from collections.abc import Iterable, Iterator
from typing import NoReturn

from feedledger.archive.rejected import (
    UNFILED,
    RejectedPayload,
    note_folder,
)
from feedledger.archive.rejected import note as rejected_note
from feedledger.archive.rejected import order as order_rejected
from feedledger.archive.rejected import parse as parse_rejected
from feedledger.archive.s3client import S3Client
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


class S3Archive:
    """Write-once, content-addressed payload store under an ``s3://bucket/prefix``."""

    def __init__(self, url: str, *, endpoint_url: str | None = None) -> None:
        self._s3 = S3Client(url, endpoint_url=endpoint_url)
        self.url = self._s3.url
        self.bucket, self.prefix = self._s3.bucket, self._s3.prefix
        self.endpoint_url = self._s3.endpoint_url

    def __repr__(self) -> str:
        return f"S3Archive({self.url!r})"

    @property
    def location(self) -> str:
        return self.url

    def prepare(self) -> None:
        """Check the bucket answers with the environment's credentials and takes
        conditional writes (`feedledger init`). Buckets are never created."""
        self._s3.connect()
        self._s3.conditional_writes()

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
    ) -> tuple[PayloadRef, bool]:
        """Archive `data` for `source`; returns (ref, created), exactly as
        LocalArchive.put: identical bytes are a no-op returning the archived ref, and
        different bytes for a taken publisher timestamp raise AmbiguousPayloadError."""
        ref = new_ref(
            source,
            data,
            published_at=published_at,
            fetched_at=fetched_at,
            original_name=original_name,
            content_type=content_type,
            sha256=sha256,
        )
        sha, payload_id = ref.sha256, ref.payload_id
        self._s3.connect()
        # Archive first: the bytes are stored before any sidecar or claim names them.
        self._write_object(sha, data)

        accepted = f"meta/{source}/{sidecar_name(published_at, payload_id)}"
        slot = self._s3.list(f"meta/{source}/{published_at:020d}-")
        present = [rel for rel in slot if rel.endswith(".json")]
        if accepted in present:
            return self._existing(accepted, source), False
        if present:
            self._refuse(ref, [rel.rsplit("/", 1)[1][21:-5] for rel in present])

        claim = f"claims/{source}/{published_at:020d}.json"
        if self._s3.create(claim, sidecar_bytes(ref)):
            self._s3.create(accepted, sidecar_bytes(ref))  # a twin may have: the same bytes
            return ref, True
        holder = self._claim_holder(claim, ref)
        # The claim decided; make sure its sidecar exists (its writer may have stopped).
        self._s3.create(
            f"meta/{source}/{sidecar_name(published_at, holder.payload_id)}",
            sidecar_bytes(holder),
        )
        if holder.payload_id != payload_id:
            self._refuse(ref, [holder.payload_id])
        return holder, False

    def _claim_holder(self, claim: str, ref: PayloadRef) -> PayloadRef:
        raw = self._s3.read(claim)
        try:
            if raw is None:
                raise ValueError("it vanished while being read")
            holder = parse_sidecar_bytes(raw, name=None, parent=ref.source)
            if holder.published_at != ref.published_at:
                raise ValueError(f"it claims published_at {holder.published_at}")
        except ValueError as exc:
            raise FeedledgerError(
                f"archive claim {self._s3.url_of(claim)} is damaged: {exc}",
                source=ref.source,
                hint="inspect or restore it; the archive never rewrites it",
            ) from exc
        return holder

    def _refuse(self, ref: PayloadRef, rival_ids: builtins.list[str]) -> NoReturn:
        rejected = f"rejected/{ref.source}/{sidecar_name(ref.published_at, ref.payload_id)}"
        self._s3.create(rejected, sidecar_bytes(ref))
        raise ambiguous(ref, rival_ids, self._s3.url_of(rejected))

    def _existing(self, rel: str, source: str) -> PayloadRef:
        raw = self._s3.read(rel)
        name, parent = rel.rsplit("/", 2)[2], source
        try:
            if raw is None:
                raise ValueError("it vanished while being read")
            return parse_sidecar_bytes(raw, name=name, parent=parent)
        except ValueError as exc:
            raise FeedledgerError(
                f"archive sidecar {self._s3.url_of(rel)} is damaged: {exc}",
                source=source,
                hint="inspect or restore it; the archive never rewrites it",
            ) from exc

    def _write_object(self, sha: str, data: bytes) -> bool:
        rel = f"objects/{sha[:2]}/{sha}"
        if self._s3.exists(rel):
            return False
        return self._s3.create(rel, data)

    def put_object(self, data: bytes) -> str:
        """Store the bytes alone (content-addressed); returns their sha256."""
        sha = hashlib.sha256(data).hexdigest()
        self._s3.connect()
        self._write_object(sha, data)
        return sha

    def keep_rejected(
        self,
        source: str,
        data: bytes,
        *,
        original_name: str | None = None,
        reason: str = "",
        filed: bool = True,
    ) -> str:
        """Keep unusable bytes plus a note under `rejected/<source>/` (`filed`: the source
        is known) or `rejected/_unfiled/`, as LocalArchive; returns the bytes' s3:// URL."""
        sha = hashlib.sha256(data).hexdigest()
        self._s3.connect()
        self._write_object(sha, data)
        name, note = rejected_note(source, sha, len(data), original_name, reason, now_us())
        rel = f"rejected/{note_folder(source, filed=filed)}/{name}"
        self._s3.create(rel, note)
        return self._s3.url_of(f"objects/{sha[:2]}/{sha}")

    def rejected(self, source: str) -> builtins.list[RejectedPayload]:
        """Refused payloads of `source` (filed under it, or unfiled notes naming it),
        oldest refusal first. Unreadable notes are skipped with a warning."""
        check_source(source)
        self._s3.connect()
        rels = [
            rel
            for folder in (source, UNFILED)
            for rel in self._s3.list(f"rejected/{folder}/")
            if rel.endswith(".json") and len(rel.split("/")) == 3
        ]
        contents = self._s3.read_many(rels)
        found: builtins.list[RejectedPayload] = []
        for rel in rels:
            raw = contents[rel]
            if raw is None:
                continue  # deleted since the listing
            _, folder, name = rel.split("/")
            try:
                item = parse_rejected(
                    raw,
                    folder=folder,
                    name=name,
                    note_at=self._s3.url_of(rel),
                    object_at=lambda sha: self._s3.url_of(f"objects/{sha[:2]}/{sha}"),
                )
            except ValueError as exc:
                warnings.warn(
                    f"skipping rejected-payload note {self._s3.url_of(rel)}: {exc}", stacklevel=2
                )
                continue
            if item.source == source:
                found.append(item)
        return order_rejected(found)

    # -- reading -----------------------------------------------------------------------

    def has(self, sha256: str) -> bool:
        if not SHA_RE.match(sha256):
            return False
        self._s3.connect()
        return self._s3.exists(f"objects/{sha256[:2]}/{sha256}")

    def get(self, sha256: str) -> bytes:
        """The object's bytes, verified against its hash."""
        if not SHA_RE.match(sha256):
            raise NotFoundError(f"{sha256!r} is not a sha256 hex digest (64 lowercase hex digits)")
        self._s3.connect()
        rel = f"objects/{sha256[:2]}/{sha256}"
        data = self._s3.read(rel)
        if data is None:
            raise NotFoundError(f"no archived object with sha256 {sha256} in {self.url}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise FeedledgerError(
                f"archived object {self._s3.url_of(rel)} is corrupt: its bytes hash to {actual}, "
                f"not {sha256}",
                hint="restore it from a backup or re-fetch the payload",
            )
        return data

    def _load(
        self, rels: Iterable[str], start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        wanted: builtins.list[tuple[str, str, str]] = []
        for rel in rels:
            parts = rel.split("/")
            if len(parts) != 3 or not parts[2].endswith(".json") or parts[2].startswith("."):
                continue
            match = SIDECAR_RE.match(parts[2])
            if match is None:
                warnings.warn(
                    f"skipping archive sidecar {self._s3.url_of(rel)}: unexpected file name",
                    stacklevel=3,
                )
                continue
            ts = int(match["ts"])
            if (start_us is not None and ts < start_us) or (end_us is not None and ts > end_us):
                continue
            wanted.append((rel, parts[1], parts[2]))
        contents = self._s3.read_many([rel for rel, _, _ in wanted])
        refs: builtins.list[PayloadRef] = []
        for rel, parent, name in wanted:
            raw = contents[rel]
            if raw is None:
                continue  # deleted since the listing
            try:
                refs.append(parse_sidecar_bytes(raw, name=name, parent=parent))
            except ValueError as exc:
                warnings.warn(
                    f"skipping archive sidecar {self._s3.url_of(rel)}: {exc}", stacklevel=3
                )
        refs.sort(key=lambda r: (r.published_at, r.payload_id))
        return refs

    def scan(self, source: str | None = None) -> builtins.list[PayloadRef]:
        """All accepted payloads (of one source, or all), by (published_at, payload_id)."""
        if source is not None:
            check_source(source)
        self._s3.connect()
        return self._load(self._s3.list(f"meta/{source}/" if source else "meta/"))

    def list(
        self, source: str, start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]:
        """Accepted payloads of `source` with start_us <= published_at <= end_us, in order.
        Sidecar names sort by time, so only the window is listed and read."""
        check_source(source)
        self._s3.connect()
        base = f"meta/{source}/"
        after = f"{base}{start_us:020d}" if start_us is not None and start_us > 0 else None

        def window() -> Iterator[str]:
            for rel in self._s3.list(base, after):
                match = SIDECAR_RE.match(rel[len(base) :])
                if match is not None and end_us is not None and int(match["ts"]) > end_us:
                    return
                yield rel

        return self._load(window(), start_us, end_us)
