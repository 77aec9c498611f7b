"""The blob-store protocol the archive's rules (`archive/core.py`) are written over.

A blob store keeps byte strings under relative keys (``objects/ab/<sha>``,
``meta/<source>/<name>.json``...) and knows nothing of payloads, sidecars or claims. Two
implement it: a local (or mounted) folder (`archive/local.py`) and S3-compatible object
storage (`archive/s3client.py`). Only what those two differ in is here:

* `create` is the only write, and it never overwrites: write-once is the store's promise;
* `delete` is only for `archive compact`, removing a raw object once its compressed
  replacement (same original bytes) is durable;
* `slot` is how writers of one source's publication slots are kept apart: a folder
  takes an advisory lock (so a look at the slot's sidecars is decisive); object storage
  has no locks, so the archive settles a slot with a claim key that exactly one
  conditional `create` wins;
* `where` names a key for messages (a path or an s3:// URL).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Protocol


class BlobStore(Protocol):
    """Byte strings under relative keys, each created once and never overwritten."""

    def where(self, rel: str) -> str:
        """Where `rel` is, for messages: a path or a URL."""
        ...

    def missing(self, sha256: str) -> str:
        """The message for an object that is not there."""
        ...

    def prepare(self) -> None:
        """Make the store usable (`feedledger init`): create a folder, check a bucket."""
        ...

    def connect(self) -> None:
        """Check once, before the first request, that the store answers."""
        ...

    def writing(self) -> AbstractContextManager[None]:
        """Around a write: the store's environment failures (full disk, read-only file
        system...) become one clear error naming the place."""
        ...

    def slot(self, folder: str) -> AbstractContextManager[bool]:
        """Keep writers of `folder` apart while held. True: they are (a lock), so what
        is listed in it stays true until released; False: no locks, a claim decides."""
        ...

    def exists(self, rel: str) -> bool: ...

    def create(self, rel: str, data: bytes) -> bool:
        """Durably write `rel` once; False (nothing written) if it exists."""
        ...

    def delete(self, rel: str) -> None:
        """Durably remove `rel` (absent already: nothing to do)."""
        ...

    def read(self, rel: str) -> bytes | None:
        """The bytes at `rel`, None if absent; OSError if it cannot be read."""
        ...

    def read_many(self, rels: builtins.list[str]) -> dict[str, bytes | OSError | None]:
        """Several keys at once (concurrently where the store can): their bytes, None
        for those gone since listed, the OSError of those that could not be read."""
        ...

    def list(self, rel_prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Keys starting with `rel_prefix` (after `start_after`), in key order."""
        ...
