"""The archive in a local (or mounted) folder: the blob store of `archive/core.py` on a
file system, and `LocalArchive`, the archive's rules over it.

Every file is written to a temporary file in its final directory, fsync'd, made
read-only, then hard-linked into place only if absent (never overwritten) and the
directory fsync'd. Several processes may use one archive at once: creation is atomic
(`os.link` fails if the name exists) and the check-and-create of a source's sidecars is
serialised by an advisory lock on `meta/<source>/.lock` (so no claims are written).
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from feedledger.archive.core import BlobArchive, object_rel
from feedledger.archive.durable import fsync_dir, write_new
from feedledger.archive.objects import DEFAULT_MIN_SIZE, KeyframeEvery
from feedledger.archive.sidecar import SHA_RE
from feedledger.archive.staged import INCOMING, StagedFile
from feedledger.model.envfail import env_failure, failing_path
from feedledger.model.errors import ArchiveUnavailableError, NotFoundError

# the key of an object stored raw (`object_rel`): one an ingest compresses from its file
# right after writing it, so written through the page cache (archive/durable.py)
_RAW_OBJECT = re.compile(r"objects/[0-9a-f]{2}/[0-9a-f]{64}")

if sys.platform == "win32":  # pragma: no cover - no advisory locks; os.link still guards

    def _lock_exclusive(fd: int) -> None:
        return None

else:
    import fcntl

    def _lock_exclusive(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)


class FolderBlobs:
    """Write-once files under `root`, keys being their paths relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def where(self, rel: str) -> str:
        return str(self.root / rel)

    def missing(self, sha256: str) -> str:
        return f"no archived object with sha256 {sha256}"

    def prepare(self) -> None:
        with self.writing():
            self._ensure_dir(self.root)

    def connect(self) -> None:
        return None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A full disk, a read-only file system, no permission... under a write: one
        clear error naming the path and the fix (nothing reached the ledger yet)."""
        try:
            yield
        except OSError as exc:
            failure = env_failure(exc)
            if failure is None:
                raise
            path = failing_path(exc, str(self.root))
            raise ArchiveUnavailableError(
                f"cannot write the archive at {path}: {failure.cause} ({failure.detail})",
                hint=f"{failure.fix(path)}; the ledger is unchanged",
            ) from exc

    @contextmanager
    def slot(self, folder: str) -> Iterator[bool]:
        """An exclusive advisory lock on `<folder>/.lock` (released on close)."""
        directory = self.root / folder
        self._ensure_dir(directory)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock_exclusive(fd)
            yield True
        finally:
            os.close(fd)  # closing releases the lock

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def create(self, rel: str, data: bytes) -> bool:
        """Atomically create `rel` with `data` (read-only) unless it exists."""
        final = self.root / rel
        directory = final.parent
        self._ensure_dir(directory)
        tmp = directory / f".{final.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        try:
            # a raw object is compressed from its file right after (archive/settle.py)
            write_new(tmp, data, read_soon=_RAW_OBJECT.fullmatch(rel) is not None)
            os.chmod(tmp, 0o444)
            try:
                os.link(tmp, final)
                created = True
            except FileExistsError:
                created = False
            except OSError:  # pragma: no cover - file systems without hard links
                if final.exists():
                    created = False
                else:
                    os.rename(tmp, final)
                    created = True
        finally:
            tmp.unlink(missing_ok=True)
        if created:
            fsync_dir(directory)
        return created

    def delete(self, rel: str) -> None:
        path = self.root / rel
        try:
            path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(path.parent)

    def _ensure_dir(self, path: Path) -> None:
        """mkdir -p, fsync'ing the parent of every directory created."""
        if path.is_dir():
            return
        missing: builtins.list[Path] = []
        probe = path
        while not probe.is_dir():
            missing.append(probe)
            if probe.parent == probe:
                break
            probe = probe.parent
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            fsync_dir(directory.parent)

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except FileNotFoundError:
            return None

    def read_many(self, rels: builtins.list[str]) -> dict[str, bytes | OSError | None]:
        out: dict[str, bytes | OSError | None] = {}
        for rel in rels:
            try:
                out[rel] = (self.root / rel).read_bytes()
            except OSError as exc:  # missing too: listed a moment ago, so not expected
                out[rel] = exc
        return out

    def list(self, rel_prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Files under `rel_prefix`, folder by folder, each folder's names sorted."""
        folder, _, name_prefix = rel_prefix.rpartition("/")
        yield from self._walk(folder, name_prefix, start_after)

    def _walk(self, folder: str, name_prefix: str, start_after: str | None) -> Iterator[str]:
        try:
            with os.scandir(self.root / folder) as found:
                entries = sorted(
                    (e.name, e.is_dir()) for e in found if e.name.startswith(name_prefix)
                )
        except (FileNotFoundError, NotADirectoryError):
            return
        for name, is_dir in entries:
            rel = f"{folder}/{name}" if folder else name
            if is_dir:
                yield from self._walk(rel, "", start_after)
            elif start_after is None or rel > start_after:
                yield rel


class LocalArchive(BlobArchive):
    """Write-once, content-addressed payload store in a directory."""

    def __init__(
        self,
        root: Path,
        *,
        keyframe_every: KeyframeEvery | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
    ) -> None:
        self.root = Path(root)
        super().__init__(FolderBlobs(self.root), keyframe_every=keyframe_every, min_size=min_size)

    def __repr__(self) -> str:
        return f"LocalArchive({str(self.root)!r})"

    @property
    def location(self) -> str:
        """Where the archive lives, for messages: its folder."""
        return str(self.root)

    def path_of(self, sha256: str) -> Path:
        """Where the object with this sha256 lives stored raw (whether or not it exists;
        a compressed one is this path plus `.zst`)."""
        if not SHA_RE.match(sha256):
            raise NotFoundError(f"{sha256!r} is not a sha256 hex digest (64 lowercase hex digits)")
        return self.root / object_rel(sha256)

    def _raw_file(self, sha256: str) -> Path | None:
        return self.path_of(sha256)

    def stage(self, path: Path) -> StagedFile:
        """A copy of the payload file `path` inside the archive's folder, to be read
        and then archived as it is (`commit`: archive/staged.py)."""
        with self._blobs.writing():
            return StagedFile.copy(path, self.root / INCOMING)

    def commit(self, staged: StagedFile) -> str:
        """Store the staged copy as a raw object (durable, content-addressed; to be
        compressed by `settle`, as `put_object(..., later=True)` stores one); returns
        its sha256."""
        sha = staged.digest()
        with self._blobs.writing():
            if not self.objects.exists(sha):
                staged.link(self.path_of(sha))
        return sha
