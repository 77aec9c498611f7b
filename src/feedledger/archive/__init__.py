"""Content-addressed, write-once payload archive (Invariant 1: archive first).

May import: `feedledger.model` and the leaf utilities (`timing`, `faults`, `ahead`);
never its siblings `sources` and `config` or a layer above, nor SQL (pyproject's
[tool.importlinter]).

The archive's rules are written once (`archive/core.py`) over a small blob-store
protocol (`archive/blobs.py`: create-once, read, exists, list, hold a slot) that two
backends provide: a local (or mounted) folder (`archive/local.py`), and S3-compatible
object storage for workers on several machines (``s3://bucket/prefix``,
`archive/s3client.py`; needs s3fs, imported only when such an archive is opened).
Payloads are stored compressed, each against its source's previous one, with a
standalone keyframe every K (`archive/objects.py`, `archive/codec.py`); an ingest
stores its payload raw, then compresses it from its file beside its transaction
(`archive/settle.py`, `archive/streaming.py`); `archive compact` converts raw ones in
place and `archive verify` re-reads every payload (`archive/maintain.py`).
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from feedledger.archive.local import LocalArchive
from feedledger.archive.maintain import CompactItem, Progress, VerifyItem
from feedledger.archive.objects import KeyframeEvery
from feedledger.archive.rejected import RejectedPayload
from feedledger.model.errors import ArchiveUnavailableError, ConfigError
from feedledger.model.payload import PayloadRef

S3_SCHEME = "s3://"


@runtime_checkable
class Archive(Protocol):
    """What the layers above need from an archive, whichever the backend.

    `path_of` is deliberately absent: it is specific to a local file system. Locations
    (`location`, what `keep_rejected` returns) are strings: a path or an s3:// URL.
    """

    @property
    def location(self) -> str: ...

    def prepare(self) -> None: ...

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
    ) -> tuple[PayloadRef, bool]: ...

    def put_object(self, data: bytes, source: str | None = None, *, later: bool = False) -> str: ...

    def settle(self, source: str, sha256: str, published_at: int) -> list[str]: ...

    def settle_streamed(self, source: str, sha256: str) -> list[str]: ...

    def get(self, sha256: str) -> bytes: ...

    def keep_rejected(
        self,
        source: str,
        data: bytes,
        *,
        original_name: str | None = None,
        reason: str = "",
        filed: bool = True,
    ) -> str: ...

    def rejected(self, source: str) -> builtins.list[RejectedPayload]: ...

    def has(self, sha256: str) -> bool: ...

    def compact(
        self, source: str | None = None, progress: Progress | None = None
    ) -> builtins.list[CompactItem]: ...

    def verify(
        self, source: str | None = None, progress: Progress | None = None
    ) -> builtins.list[VerifyItem]: ...

    def scan(self, source: str | None = None) -> builtins.list[PayloadRef]: ...

    def list(
        self, source: str, start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]: ...


def is_object_store_url(location: str | Path) -> bool:
    return str(location).startswith(S3_SCHEME)


def open_archive(
    location: str | Path,
    *,
    endpoint_url: str | None = None,
    keyframe_every: KeyframeEvery | None = None,
) -> Archive:
    """The archive at `location`: a folder (created on first write) or an
    ``s3://bucket/prefix`` URL, whose store's endpoint may be given as `endpoint_url`
    (the AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL variables take precedence).
    `keyframe_every(source)`: a standalone frame every so many payloads (default 30)."""
    text = str(location)
    if is_object_store_url(text):
        from feedledger.archive.objectstore import S3Archive  # lazy: ~3 ms, s3:// only

        return S3Archive(text, endpoint_url=endpoint_url, keyframe_every=keyframe_every)
    if "://" in text:
        raise ConfigError(
            f"archive location {text!r} is neither a folder nor an s3:// URL",
            hint="use a path, or s3://BUCKET/PREFIX for S3-compatible object storage",
        )
    return LocalArchive(Path(text), keyframe_every=keyframe_every)


__all__ = [
    "Archive",
    "ArchiveUnavailableError",
    "CompactItem",
    "LocalArchive",
    "RejectedPayload",
    "VerifyItem",
    "is_object_store_url",
    "open_archive",
]
