"""Content-addressed, write-once payload archive (Invariant 1: archive first)."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Protocol, runtime_checkable

from feedledger.archive.local import LocalArchive
from feedledger.model.payload import PayloadRef


@runtime_checkable
class Archive(Protocol):
    """What the layers above need from an archive; LocalArchive now, S3 later.

    `path_of` is deliberately absent: it is specific to a local file system.
    """

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
    ) -> tuple[PayloadRef, bool]: ...

    def put_object(self, data: bytes) -> str: ...

    def get(self, sha256: str) -> bytes: ...

    def keep_rejected(
        self,
        source: str,
        data: bytes,
        *,
        original_name: str | None = None,
        reason: str = "",
    ) -> Path: ...

    def has(self, sha256: str) -> bool: ...

    def scan(self, source: str | None = None) -> builtins.list[PayloadRef]: ...

    def list(
        self, source: str, start_us: int | None = None, end_us: int | None = None
    ) -> builtins.list[PayloadRef]: ...


def open_archive(root: Path) -> LocalArchive:
    """The archive rooted at `root` (a directory; created on first write)."""
    return LocalArchive(Path(root))


__all__ = ["Archive", "LocalArchive", "open_archive"]
