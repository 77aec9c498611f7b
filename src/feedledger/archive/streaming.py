"""zstd frames written from a file and checked a chunk at a time (the objects of
`archive/codec.py`, the same format), so compressing a payload stored raw never holds
its bytes whole: what `archive/settle.py` does after an ingest.

`encode_from` maps the raw file and hands zstd a growing window of it
(``ZSTD_c_stableInBuffer``: zstd reads the mapping in place, no copy into a buffer of
its own), a delta with the base's bytes as its prefix as `codec.encode_delta` does,
hashing (XXH3-128) each chunk as it goes. `decode_into` decodes an object into a buffer
of the caller's (``ZSTD_d_stableOutBuffer``: the base cache's file, mapped), feeding
the frame a little at a time and hashing what each step wrote: equal digests are the
check that the object gives back the bytes the encoder read (a decompress-and-compare
through a digest). After each step both hand the pages a lag behind back to the kernel
(`Pages`): the mappings are files, so a page zstd looks back at again is read back from
the page cache, never lost; the process keeps O(chunk) of them resident, not the
payload. Both need the CFFI backend (`codec.can_decode_into`).

`encode_keyframe_from` and `keyframe_digest` stream a keyframe through
python-zstandard's own reader and writer (a source's `memory_budget`: no base at all).
"""

from __future__ import annotations

import hashlib
import io
import mmap
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash
import zstandard

from feedledger.archive import codec

# what each step hands zstd: a chunk of the raw file, or of a frame being checked
STREAM_CHUNK = 8 << 20
FRAME_STEP = 16 << 10
# pages this far behind the step are handed back (zstd's matches reach back further now
# and then: such a page is read again from the page cache)
LAG = 16 << 20
_RELEASES = sys.platform.startswith("linux")  # MADV_DONTNEED keeps a file's contents

Released = Callable[[int], None]


class Pages:
    """Hands back, a lag behind, the pages of a file's shared mapping from `offset`
    on that a stream has gone past (`__call__(done)`: the stream's position)."""

    def __init__(self, mapped: mmap.mmap, offset: int = 0) -> None:
        self._map, self._offset, self._lag = mapped, offset, LAG
        self._released = 0  # the mapping's bytes before this are handed back

    def __call__(self, done: int) -> None:
        end = self._offset + done - self._lag
        end -= end % mmap.PAGESIZE
        if not _RELEASES or end <= self._released:
            return
        self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
        self._released = end


def encode_from(
    path: Path,
    sha256: str,
    size: int,
    base: bytes | memoryview | None = None,
    base_sha: str | None = None,
    depth: int = 0,
) -> tuple[bytes, str]:
    """The object `codec.encode_keyframe` (no `base`) or `codec.encode_delta` (`base`,
    the payload `base_sha`, at chain `depth`) writes for the `size` bytes of the file
    `path`, compressed from the file mapped a chunk at a time, and the XXH3-128 of the
    bytes it read (what `decode_into` must give back)."""
    lib_ffi = codec.zstd_lib()
    if lib_ffi is None or size == 0:
        raise codec.FrameError("streamed compression needs zstd's CFFI backend")
    lib = lib_ffi[0]
    params = [
        (lib.ZSTD_c_checksumFlag, 1),
        (lib.ZSTD_c_contentSizeFlag, 1),
        (lib.ZSTD_c_stableInBuffer, 1),
    ]
    if base is None:
        params.append((lib.ZSTD_c_compressionLevel, codec.KEYFRAME_LEVEL))
    else:
        params += [
            (lib.ZSTD_c_compressionLevel, codec.DELTA_LEVEL),
            (lib.ZSTD_c_windowLog, codec.window_log(len(base), size)),
            (lib.ZSTD_c_enableLongDistanceMatching, 1),
        ]
    header = codec.Header(sha256, size, None if base is None else base_sha, depth)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as src:
        if hasattr(os, "posix_fadvise"):  # read ahead, the file at once (written O_DIRECT)
            os.posix_fadvise(handle.fileno(), 0, size, os.POSIX_FADV_WILLNEED)
        if len(src) != size:
            raise codec.FrameError(f"the raw file holds {len(src)} bytes, not {size}")
        if _RELEASES:
            src.madvise(mmap.MADV_SEQUENTIAL)
        return _compress(lib_ffi, params, src, base, Pages(src), codec.header_bytes(header))


def _compress(
    lib_ffi: tuple[Any, Any],
    params: list[tuple[int, int]],
    src: mmap.mmap,
    base: bytes | memoryview | None,
    released: Released,
    header: bytes,
) -> tuple[bytes, str]:
    """(`header` + the frame, the XXH3-128 of `src`)."""
    lib, ffi = lib_ffi
    read = xxhash.xxh3_128()
    check = _checker(lib_ffi, "compress")
    cctx = lib.ZSTD_createCCtx()
    if cctx == ffi.NULL:
        raise MemoryError("zstd could not allocate a compression context")
    source, view = ffi.from_buffer(src), memoryview(src)
    prefix = None if base is None else ffi.from_buffer(base)
    try:
        for param, value in params:
            check(lib.ZSTD_CCtx_setParameter(cctx, param, value))
        check(lib.ZSTD_CCtx_setPledgedSrcSize(cctx, len(src)))
        if prefix is not None:
            check(lib.ZSTD_CCtx_refPrefix(cctx, prefix, len(prefix)))
        capacity = lib.ZSTD_CStreamOutSize()
        out = ffi.new_allocator(should_clear_after_alloc=False)("char[]", capacity)
        inbuf, outbuf = ffi.new("ZSTD_inBuffer *"), ffi.new("ZSTD_outBuffer *")
        inbuf.src, inbuf.size, inbuf.pos = source, 0, 0
        outbuf.dst, outbuf.size = out, capacity
        frame = bytearray(header)  # one copy of the object when it is done, not two
        while True:
            step = min(len(src), inbuf.size + STREAM_CHUNK)
            read.update(view[inbuf.size : step])  # (the pages then hot for zstd)
            inbuf.size = step
            last = inbuf.size == len(src)
            mode = lib.ZSTD_e_end if last else lib.ZSTD_e_continue
            while True:
                outbuf.pos = 0
                left = check(lib.ZSTD_compressStream2(cctx, outbuf, inbuf, mode))
                frame += ffi.buffer(out, outbuf.pos)
                if (left == 0) if last else (inbuf.pos == inbuf.size):
                    break
            released(inbuf.pos)
            if last:
                return bytes(frame), read.hexdigest()
    finally:
        lib.ZSTD_freeCCtx(cctx)
        view.release()
        ffi.release(source)
        if prefix is not None:
            ffi.release(prefix)


def decode_into(
    stored: bytes,
    base: bytes | memoryview | None,
    into: memoryview,
    released: Released | None = None,
) -> str:
    """Decode the object `stored` (`base`: its base's bytes, for a delta) into `into`
    (exactly its size: a frame that gives more or fewer bytes is a FrameError); the
    XXH3-128 of what it gave, computed as it was written. `released` hears how far the
    decoding has got, to hand back the pages behind (`Pages`)."""
    lib_ffi = codec.zstd_lib()
    header, frame = codec.parse(stored)
    if lib_ffi is None:
        raise codec.FrameError("streamed checking needs zstd's CFFI backend")
    if (header.base is None) != (base is None) or len(into) != header.size:
        raise codec.FrameError("a delta needs its base's bytes (and a keyframe none)")
    lib, ffi = lib_ffi
    check = _checker(lib_ffi, "decompress")
    xxh = xxhash.xxh3_128()
    dctx = lib.ZSTD_createDCtx()
    if dctx == ffi.NULL:
        raise MemoryError("zstd could not allocate a decompression context")
    out = ffi.from_buffer("char[]", into, require_writable=True)
    source = ffi.from_buffer(frame)
    prefix = None if base is None else ffi.from_buffer(base)
    try:
        check(lib.ZSTD_DCtx_setParameter(dctx, lib.ZSTD_d_windowLogMax, codec.MAX_WINDOW_LOG))
        check(lib.ZSTD_DCtx_setParameter(dctx, lib.ZSTD_d_stableOutBuffer, 1))
        if prefix is not None:
            check(lib.ZSTD_DCtx_refPrefix(dctx, prefix, len(prefix)))
        inbuf, outbuf = ffi.new("ZSTD_inBuffer *"), ffi.new("ZSTD_outBuffer *")
        inbuf.src, inbuf.size, inbuf.pos = source, 0, 0
        outbuf.dst, outbuf.size, outbuf.pos = out, len(into), 0
        left = 1
        while left:
            if inbuf.pos == inbuf.size:
                if inbuf.size == len(frame):
                    raise codec.FrameError("its zstd frame is cut short")
                inbuf.size = min(len(frame), inbuf.size + FRAME_STEP)
            before = outbuf.pos
            left = check(lib.ZSTD_decompressStream(dctx, outbuf, inbuf))
            if outbuf.pos > before:
                xxh.update(into[before : outbuf.pos])
                if released is not None:
                    released(outbuf.pos)
        if outbuf.pos != header.size or inbuf.pos != len(frame):
            raise codec.FrameError(f"it decompresses to {outbuf.pos} bytes, not {header.size}")
    finally:
        lib.ZSTD_freeDCtx(dctx)
        for buffer in (out, source, prefix):
            if buffer is not None:
                ffi.release(buffer)  # `into` may be a mapping its owner closes next
    return xxh.hexdigest()


def _checker(lib_ffi: tuple[Any, Any], what: str) -> Callable[[int], int]:
    lib, _ = lib_ffi

    def check(code: int) -> int:
        if lib.ZSTD_isError(code):
            raise codec.FrameError(f"zstd could not {what} ({codec.error_name(lib_ffi, code)})")
        return code

    return check


def encode_keyframe_from(path: Path, sha256: str, size: int) -> bytes:
    """The keyframe of the `size` bytes in the file `path` (the same object
    `codec.encode_keyframe` writes) through python-zstandard's stream copy, read from
    the file a chunk at a time: no CFFI backend needed."""
    out = io.BytesIO()
    out.write(codec.header_bytes(codec.Header(sha256, size, None, 0)))
    cctx = zstandard.ZstdCompressor(
        level=codec.KEYFRAME_LEVEL, write_checksum=True, write_content_size=True, threads=0
    )
    with path.open("rb") as src:
        cctx.copy_stream(src, out, size=size, read_size=STREAM_CHUNK, write_size=STREAM_CHUNK)
    return out.getvalue()


def keyframe_digest(stored: bytes) -> tuple[str, int]:
    """The sha256 and length of what the keyframe `stored` decompresses to, read a chunk
    at a time (FrameError if it is not a readable keyframe)."""
    header, frame = codec.parse(stored)
    if header.base is not None:
        raise codec.FrameError("a delta, not a keyframe")
    digest, size = hashlib.sha256(), 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(frame, read_size=STREAM_CHUNK) as rd:
            while chunk := rd.read(STREAM_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except zstandard.ZstdError as exc:
        raise codec.FrameError(f"its zstd frame cannot be decompressed ({exc})") from exc
    return digest.hexdigest(), size
