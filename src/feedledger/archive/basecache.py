"""A local copy of each source's latest compressed payload, so the next payload of the
source is delta-encoded against it without decoding its chain (issue 17: a new process
archiving one payload decoded up to `keyframe_every - 1` frames first).

    <folder>/<source>/<sha256>     {"depth": <n>, "chain": [<sha256>, ...],
                                    "xxh3_128": <hex>}\\n + the bytes

One file per source, named by the payload's sha256, written to a temporary file and
renamed into place, the source's previous file removed after. It is only an
accelerator: `load` returns None (the caller decodes the chain as before) when the file
is missing, unreadable, or its bytes do not give the digest its header records (the
XXH3-128 of the bytes written, which were the payload whose sha256 names the file).
XXH3 because the check runs on every daily ingest: 0.01 s for 107 MB against 0.09 s
for a sha256, and what it guards against is damage on disk, not a forger (who could
write the archive itself). A file without that digest (an older release's) is checked
against its sha256 name instead. Whether it is the
source's *current* base, and matches the stored object's depth, is the caller's check
(`archive/objects.py`). So it is not fsync'd (an fsync of a 107 MB base cost a daily
ingest ~0.3 s of wall time): a kill at any point, or a power loss that leaves the
renamed file empty or short, leaves at worst a stale, damaged or temporary file, all
ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import xxhash

from feedledger.archive.streaming import Pages

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_MAX_HEADER = 1 << 16
_DIGEST_LENGTH = len(xxhash.xxh3_128_hexdigest(b""))


@dataclass(frozen=True)
class CachedBase:
    """A cached payload's bytes, its chain depth and chain (itself first). Loaded, the
    bytes are a read-only view of the file mapped in memory: not copied (reading 107 MB
    into a new buffer cost ~0.1 s of a daily ingest); the file is only ever replaced by
    a rename, never written in place, so the view stays the bytes that were checked."""

    data: bytes | memoryview
    depth: int
    chain: tuple[str, ...]


class BaseCache:
    """The cache files under `folder` (one subfolder per source)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _dir(self, source: str) -> Path | None:
        if not source or "/" in source or "\\" in source or source.startswith("."):
            return None
        return self.folder / source

    def load(self, source: str, sha256: str) -> CachedBase | None:
        """The cached bytes of `sha256` for `source`, checked against the name; None if
        there is no such file or it is damaged."""
        directory = self._dir(source)
        if directory is None or _SHA_RE.match(sha256) is None:
            return None
        try:
            with (directory / sha256).open("rb") as handle:
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
            return None
        end = mapped.find(b"\n", 0, _MAX_HEADER)
        if end < 0:
            return None
        header, data = mapped[: end + 1], memoryview(mapped)[end + 1 :]
        return _parse(header, data, sha256)

    def store(self, source: str, sha256: str, cached: CachedBase) -> None:
        """Make `cached` the source's cache file, then remove the others. Failures are
        swallowed: the cache is never needed for correctness."""
        directory = self._dir(source)
        if directory is None:
            return
        header = _header(cached.depth, cached.chain, xxhash.xxh3_128_hexdigest(cached.data))
        tmp = _temporary(directory, sha256)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(header)
                handle.write(cached.data)
        except OSError:
            tmp.unlink(missing_ok=True)
            return
        _publish(tmp, directory, sha256)

    def begin(
        self,
        source: str,
        sha256: str,
        depth: int,
        chain: tuple[str, ...],
        size: int,
        digest: str | None = None,
    ) -> PendingBase | None:
        """A cache file for the `size` bytes of the payload `sha256` (at `depth` of
        `chain`) that the caller writes in place (`PendingBase.view`: the archive's
        write check decodes the new object there, so the check and the copy are one
        pass), then publishes with their XXH3-128 `digest` (given here, or once known
        to `publish`); None if it cannot be made (the caller checks and caches as
        before)."""
        directory = self._dir(source)
        if directory is None or not hasattr(os, "posix_fallocate"):
            return None  # (macOS, Windows: no posix_fallocate; the file is written)
        tmp = _temporary(directory, sha256)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            _sweep(directory)
            return PendingBase(directory, sha256, tmp, (depth, chain, digest), size)
        except (OSError, ValueError):
            tmp.unlink(missing_ok=True)
            return None


class PendingBase:
    """A cache file being filled: its header written, `view` the (mapped, writable)
    room for the bytes. The blocks are allocated up front, so a full disk is an error
    here, never a fault while the mapping is written. `release` hands pages already
    written back to the kernel (the file keeps them: the page cache writes them out)."""

    def __init__(
        self,
        directory: Path,
        sha256: str,
        tmp: Path,
        header: tuple[int, tuple[str, ...], str | None],
        size: int,
    ) -> None:
        self._directory, self._sha256, self._tmp = directory, sha256, tmp
        depth, chain, digest = header
        # a digest not yet known has a placeholder of its length, written over by publish
        self._header = _header(depth, chain, digest or "0" * _DIGEST_LENGTH)
        self._head = (depth, chain)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, len(self._header) + size)
            os.write(fd, self._header)
            self._map = mmap.mmap(fd, len(self._header) + size)
        finally:
            os.close(fd)
        self._whole = memoryview(self._map)
        self.view = self._whole[len(self._header) :]
        self.release = Pages(self._map, len(self._header))

    def _close(self) -> None:
        self.view.release()
        self._whole.release()
        self._map.close()

    def publish(self, digest: str | None = None) -> None:
        """Make the file the source's cache (its bytes written; `digest`: their
        XXH3-128, unless `begin` had it), the others removed. Failures are swallowed:
        the cache is never needed for correctness."""
        try:
            if digest is not None:
                header = _header(*self._head, digest)
                if len(header) != len(self._header):
                    raise ValueError("a digest of another length")
                self._map[: len(header)] = header
            self._close()
        except (OSError, BufferError, ValueError):
            self.discard()
            return
        _publish(self._tmp, self._directory, self._sha256)

    def discard(self) -> None:
        with contextlib.suppress(OSError, BufferError, ValueError):
            self._close()
        self._tmp.unlink(missing_ok=True)


def _header(depth: int, chain: tuple[str, ...], digest: str) -> bytes:
    return json.dumps({"depth": depth, "chain": list(chain), "xxh3_128": digest}).encode() + b"\n"


def _temporary(directory: Path, sha256: str) -> Path:
    return directory / f".{sha256}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


_TEMPORARY_RE = re.compile(r"^\.[0-9a-f]{64}\.(\d+)\.[0-9a-f]+\.tmp$")


def _sweep(directory: Path) -> None:
    """Remove the temporaries of processes that are gone (killed while filling one:
    a payload's size each, otherwise kept until the source's next publish). Only
    where `os.kill(pid, 0)` is a mere check (POSIX); a live pid (ours, another's, or
    a reused one) keeps its file."""
    for path in directory.iterdir():
        found = _TEMPORARY_RE.match(path.name)
        if found is None or int(found.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (OSError, OverflowError):
            continue  # alive under another user, or not a pid


def _publish(tmp: Path, directory: Path, sha256: str) -> None:
    try:
        os.replace(tmp, directory / sha256)
    except OSError:
        tmp.unlink(missing_ok=True)
        return
    for other in directory.iterdir():
        if other.name != sha256:
            other.unlink(missing_ok=True)  # older caches, temporaries left by a kill


def _parse(header: bytes, data: memoryview, sha256: str) -> CachedBase | None:
    if not header.endswith(b"\n"):
        return None
    try:
        doc = json.loads(header)
        depth = int(doc["depth"])
        chain = tuple(str(s) for s in doc["chain"])
        digest = doc.get("xxh3_128")
    except (ValueError, KeyError, TypeError):
        return None
    if not chain or chain[0] != sha256:
        return None
    if isinstance(digest, str):
        if xxhash.xxh3_128_hexdigest(data) != digest:
            return None
    elif hashlib.sha256(data).hexdigest() != sha256:
        return None
    return CachedBase(data, depth, chain)
