"""Durability of the folder archive's files and directory entries (no feedledger
imports): `write_new` writes a new file and fsyncs it, a large one around the page
cache unless it is to be read back at once; `fsync_dir` makes a directory's entries
durable."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

__all__ = ["DIRECT_MIN", "fsync_dir", "write_new"]

# Files this large are written with O_DIRECT where the file system takes it: such a
# file is a payload nobody reads back at once (a compressed object, a rejected payload),
# and its pages in the cache would only push others out (on a busy machine the kernel's
# reclaim of 107 MB was charged to the ingest). Not so a raw object an ingest compresses
# from its file right after (`read_soon`, archive/settle.py): written around the cache,
# settle read its 107 MB back from the disk at the end of the ingest, on the critical
# path (bench/README.md, "Daily process (helper proc, 2026-12-06)").
DIRECT_MIN = 32 << 20
_CHUNK = 8 << 20  # the aligned buffer the bytes go through (a multiple of any block size)
_ALIGN = 4096


def write_new(path: Path, data: bytes, mode: int = 0o600, *, read_soon: bool = False) -> None:
    """Create `path` (it must not exist) holding `data`, fsync'd. `read_soon`: the file
    is read back at once, so its pages are written through the page cache whatever its
    size."""
    if len(data) >= DIRECT_MIN and not read_soon and _write_direct(path, data, mode):
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _write_direct(path: Path, data: bytes, mode: int) -> bool:
    """`write_new` through an aligned buffer with O_DIRECT; False (nothing left at
    `path`) where the platform or file system does not take it."""
    direct = getattr(os, "O_DIRECT", 0)
    if not direct:
        return False  # pragma: no cover - macOS, Windows
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | direct, mode)
    except OSError:
        return False  # (tmpfs and some others refuse O_DIRECT at open: EINVAL)
    try:
        with mmap.mmap(-1, _CHUNK) as buffer:
            view, out = memoryview(data), memoryview(buffer)
            for start in range(0, len(data), _CHUNK):
                chunk = view[start : start + _CHUNK]
                buffer[: len(chunk)] = chunk
                padded = -(-len(chunk) // _ALIGN) * _ALIGN  # the tail, zero-padded
                if os.write(fd, out[:padded]) != padded:
                    raise OSError("a short write with O_DIRECT")
            out.release()
        os.ftruncate(fd, len(data))  # the tail's padding cut off
        os.fsync(fd)
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        return False
    os.close(fd)
    return True


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a new file, a rename) durable."""
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
