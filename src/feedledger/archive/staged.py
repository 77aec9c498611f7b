"""A payload file copied into the folder archive before it is read (`LocalArchive.stage`):
the copy is made by the kernel (no payload-sized buffer in the process), fsync'd and
made read-only under the archive's `.incoming/` folder, so that the bytes the ingest
parses are exactly the bytes it archives (nothing else writes that copy, whatever
happens to the caller's file meanwhile). `commit` hashes the copy a chunk at a time and
links it into place as the raw object named by its sha256; `close` removes the staged
name (the object, once linked, stays).

A killed ingest can leave a staged copy behind: `LocalArchive.stage` removes those
whose process is gone."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from feedledger.archive.durable import fsync_dir

INCOMING = ".incoming"
_CHUNK = 8 << 20
_SEND = 1 << 30


class StagedFile:
    """A read-only copy of a payload file inside the archive's folder."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size

    @classmethod
    def copy(cls, source: Path, folder: Path) -> StagedFile:
        """Copy `source` into `folder` (created if needed), fsync'd and read-only."""
        folder.mkdir(parents=True, exist_ok=True)
        _forget_orphans(folder)
        path = folder / f"{os.getpid()}.{secrets.token_hex(6)}.tmp"
        size = 0
        try:
            with open(source, "rb") as src:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    size = _copy(src.fileno(), fd)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.chmod(path, 0o444)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return cls(path, size)

    def digest(self) -> str:
        """The copy's sha256 (read a chunk at a time)."""
        digest = hashlib.sha256()
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        with open(self.path, "rb", buffering=0) as handle:
            while n := handle.readinto(buffer):
                digest.update(view[:n])
        return digest.hexdigest()

    def link(self, final: Path) -> bool:
        """Give the copy the name `final` (durably); False if that name exists."""
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(self.path, final)
        except FileExistsError:
            return False
        fsync_dir(final.parent)
        return True

    def close(self) -> None:
        """Remove the staged name (an open reader keeps reading it)."""
        self.path.unlink(missing_ok=True)


def _copy(src: int, dst: int) -> int:
    """All of `src` into `dst` (in the kernel where it can), the bytes copied."""
    total = 0
    try:
        while sent := os.sendfile(dst, src, total, _SEND):
            total += sent
        return total
    except OSError:
        if total:
            raise
    buffer = bytearray(_CHUNK)  # pragma: no cover - no sendfile between files here
    while n := os.readv(src, [buffer]):  # pragma: no cover
        os.write(dst, memoryview(buffer)[:n])  # pragma: no cover
        total += n  # pragma: no cover
    return total  # pragma: no cover


def _forget_orphans(folder: Path) -> None:
    """Remove staged copies whose process is gone (a killed ingest's)."""
    for old in folder.glob("*.tmp"):
        pid = old.name.split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            old.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
