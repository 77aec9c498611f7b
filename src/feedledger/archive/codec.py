"""How a payload's bytes are stored compressed: one zstd frame, standalone (a keyframe)
or compressed against an earlier payload's bytes (a delta, zstd's "patch from": the
earlier payload is the frame's raw-content dictionary).

An encoded object (``objects/<sha[:2]>/<sha>.zst``) is a zstd skippable frame holding a
small JSON header, then the zstd frame itself (content size and checksum written)::

    {"format": 1, "sha256": <the ORIGINAL bytes' sha256>, "size": <their length>,
     "base": <the sha256 of the payload it is a delta against, or null>, "depth": <n>}

`depth` is 0 for a keyframe and one more than its base's for a delta, so a reader never
decompresses more than `depth + 1` frames. A keyframe is an ordinary ``.zst`` file (the
``zstd`` tool decompresses it, skipping the header); a delta needs its base's bytes.
Only this module and `archive/streaming.py` (the same frames written from a file and
checked a chunk at a time) know zstd; the content address and every check stay on the
original bytes' sha256 (`archive/objects.py`).

A delta is written the way ``zstd --patch-from`` writes one: the base is the frame's
*prefix* (``ZSTD_CCtx_refPrefix``) and long-distance matching finds the base's long
runs that recur in the target, at zstd level 1. That is what makes it cheap: a prefix is
not indexed up front as a loaded dictionary is (a 107 MB base cost ~3 CPU s to index
before the first byte was compressed), and LDM's rolling hash finds the unchanged runs
of a day-to-day snapshot in one pass. Measured on a 1M-parcel CSV (107 MB) a day apart:
0.19 % of the size in ~0.2-0.25 CPU s (level 3: the same size, ~0.3 s), against 0.64 %
in 3.0-4.6 CPU s with the dictionary (bench/README.md, Storage; archive_codec_bench.py).
A prefix and a raw-content dictionary are the same thing to the decoder, so `decode`
reads both, and deltas written either way stay readable.
python-zstandard's C backend has no prefix call; its CFFI backend (same package, same
wheel) exposes libzstd's, which is used for this one call. Where that backend is
missing, deltas fall back to the dictionary form (`_encode_with_dictionary`).
"""

from __future__ import annotations

import functools
import importlib
import json
import struct
from dataclasses import dataclass
from typing import Any

import zstandard

FORMAT = 1
_SKIPPABLE_MAGIC = 0x184D2A5E  # one of zstd's sixteen skippable-frame magic numbers
_TAG = b"FLZ1"
# level 1: the same size as level 3 on CSV snapshots (27.4 % of a 1M day) for ~60 % of
# the CPU (0.44 vs 0.74 s): a keyframe is written on a first load
KEYFRAME_LEVEL = 1
DELTA_LEVEL = 1
MAX_WINDOW_LOG = 31  # zstd's largest window on 64-bit: 2 GiB
# a delta's base and target both sit in the window: larger payloads are keyframes
MAX_DELTA_BYTES = 1 << 30


class FrameError(ValueError):
    """The stored bytes are not a readable encoded object (the message says why)."""


@dataclass(frozen=True)
class Header:
    sha256: str
    size: int
    base: str | None
    depth: int


def header_bytes(header: Header) -> bytes:
    doc = {
        "format": FORMAT,
        "sha256": header.sha256,
        "size": header.size,
        "base": header.base,
        "depth": header.depth,
    }
    body = _TAG + json.dumps(doc, separators=(",", ":")).encode()
    return struct.pack("<II", _SKIPPABLE_MAGIC, len(body)) + body


def window_log(*sizes: int) -> int:
    """A window covering the base (the dictionary) and the target together."""
    return max(10, min(MAX_WINDOW_LOG, (max(sum(sizes), 1) - 1).bit_length() + 1))


def encode_keyframe(data: bytes, sha256: str) -> bytes:
    frame = zstandard.ZstdCompressor(
        level=KEYFRAME_LEVEL, write_checksum=True, write_content_size=True, threads=0
    ).compress(data)
    return header_bytes(Header(sha256, len(data), None, 0)) + frame


def encode_delta(
    data: bytes, sha256: str, base: bytes | memoryview, base_sha: str, depth: int
) -> bytes:
    """`data` compressed against `base` (the frame's prefix), at chain `depth`."""
    lib = _libzstd()
    frame = (
        _encode_with_prefix(lib, data, base)
        if lib is not None
        else _encode_with_dictionary(data, base)
    )
    return header_bytes(Header(sha256, len(data), base_sha, depth)) + frame


def zstd_lib() -> tuple[Any, Any] | None:
    """(lib, ffi) of the CFFI backend (`_libzstd`), for `archive/streaming.py`."""
    return _libzstd()


@functools.cache
def _libzstd() -> tuple[Any, Any] | None:
    """(lib, ffi) of python-zstandard's CFFI backend, or None where it is missing."""
    try:
        module: Any = importlib.import_module("zstandard._cffi")
        return module.lib, module.ffi
    except (ImportError, AttributeError):
        return None


def _encode_with_prefix(lib_ffi: tuple[Any, Any], data: bytes, base: bytes | memoryview) -> bytes:
    """zstd's patch-from: `base` as the prefix, long-distance matching on."""
    lib, ffi = lib_ffi

    def check(code: int) -> int:
        if lib.ZSTD_isError(code):
            name = ffi.string(lib.ZSTD_getErrorName(code)).decode()
            raise FrameError(f"zstd could not compress the delta ({name})")
        return code

    cctx = lib.ZSTD_createCCtx()
    if cctx == ffi.NULL:
        raise MemoryError("zstd could not allocate a compression context")
    try:
        for param, value in (
            (lib.ZSTD_c_compressionLevel, DELTA_LEVEL),
            (lib.ZSTD_c_windowLog, window_log(len(base), len(data))),
            (lib.ZSTD_c_enableLongDistanceMatching, 1),
            (lib.ZSTD_c_checksumFlag, 1),
            (lib.ZSTD_c_contentSizeFlag, 1),
        ):
            check(lib.ZSTD_CCtx_setParameter(cctx, param, value))
        prefix = ffi.from_buffer(base)
        check(lib.ZSTD_CCtx_refPrefix(cctx, prefix, len(base)))
        capacity = lib.ZSTD_compressBound(len(data))
        # not cleared: only the pages zstd writes are ever touched (peak RSS)
        out = ffi.new_allocator(should_clear_after_alloc=False)("char[]", capacity)
        size = check(lib.ZSTD_compress2(cctx, out, capacity, ffi.from_buffer(data), len(data)))
        frame: bytes = ffi.buffer(out, size)[:]
        return frame
    finally:
        lib.ZSTD_freeCCtx(cctx)


def _encode_with_dictionary(data: bytes, base: bytes | memoryview) -> bytes:
    """The dictionary form (no CFFI backend): `base` as a raw-content dictionary, a lazy
    strategy with a hash table sized for it (zstd's fast strategies index at most the
    last 16 MiB of a dictionary). ~20x the CPU of the prefix form, 3x its size."""
    hash_log = max(16, min(25, (max(len(base), 1) - 1).bit_length() - 3))
    params = zstandard.ZstdCompressionParameters(
        window_log=window_log(len(base), len(data)),
        strategy=zstandard.STRATEGY_LAZY,
        hash_log=hash_log,
        chain_log=min(hash_log, 18),
        search_log=1,
        min_match=6,
        write_checksum=1,
        write_content_size=1,
    )
    reference = zstandard.ZstdCompressionDict(bytes(base), dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    frame: bytes = zstandard.ZstdCompressor(
        dict_data=reference, compression_params=params
    ).compress(data)
    return frame


def is_encoded(stored: bytes) -> bool:
    return stored[:4] == struct.pack("<I", _SKIPPABLE_MAGIC) and stored[8:12] == _TAG


def parse(stored: bytes) -> tuple[Header, memoryview]:
    """The header and the zstd frame of an encoded object; FrameError if damaged."""
    if len(stored) < 12 or not is_encoded(stored):
        raise FrameError("it does not start with feedledger's compressed-object header")
    (length,) = struct.unpack_from("<I", stored, 4)
    end = 8 + length
    if end > len(stored):
        raise FrameError("its header is cut short")
    try:
        doc: Any = json.loads(stored[12:end].decode())
        header = Header(doc["sha256"], int(doc["size"]), doc["base"], int(doc["depth"]))
        if doc.get("format") != FORMAT or not isinstance(header.sha256, str):
            raise ValueError(f"unknown format {doc.get('format')!r}")
        if header.base is not None and not isinstance(header.base, str):
            raise ValueError("its base is not a sha256")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise FrameError(f"its header is damaged ({exc})") from exc
    return header, memoryview(stored)[end:]


def decode(header: Header, frame: memoryview, base: bytes | None) -> bytes:
    """The original bytes of a frame (`base`: its base's bytes, for a delta)."""
    return _decompress(header, frame, base)


def can_decode_into() -> bool:
    """Whether `verify` can decode into a buffer of the caller's (the CFFI backend)."""
    return _libzstd() is not None


def verify(
    stored: bytes,
    sha256: str,
    data: bytes,
    base: bytes | memoryview | None,
    into: memoryview | None = None,
) -> None:
    """Check, before it is stored in their place, that an encoded object gives back
    exactly `data` (whose sha256 is `sha256`); FrameError if it does not. `into`: a
    writable buffer of `len(data)` bytes to decode into (where `can_decode_into`), so
    the check leaves the decoded bytes there (the base cache's file, mapped) instead of
    in a new buffer."""
    header, frame = parse(stored)
    if header.sha256 != sha256 or not _decodes_to(header, frame, base, data, into):
        raise FrameError("the encoded frame does not decode to the payload's bytes")


def _decodes_to(
    header: Header,
    frame: memoryview,
    base: bytes | memoryview | None,
    data: bytes,
    into: memoryview | None = None,
) -> bool:
    lib = _libzstd()
    if into is not None and lib is not None:
        if (header.base is None) != (base is None) or len(into) != header.size:
            return False
        return _decoded_into(lib, header, frame, base, into, data)
    if base is None or lib is None or header.base is None:
        return _decompress(header, frame, None if base is None else bytes(base)) == data
    # a delta through the prefix call: no copy of the base into a dictionary, and the
    # result compared where zstd wrote it (half the time of the dictionary form)
    return bool(_decompress_with_prefix(lib, header, frame, base) == data)


def _decompress(header: Header, frame: memoryview, base: bytes | None) -> bytes:
    if (header.base is None) != (base is None):
        raise FrameError("a delta needs its base's bytes (and a keyframe none)")
    lib = _libzstd()
    if base is not None and lib is not None:
        data: bytes = _decompress_with_prefix(lib, header, frame, base)[:]
        return data
    try:
        if base is None:
            dctx = zstandard.ZstdDecompressor()
        else:
            reference = zstandard.ZstdCompressionDict(
                base, dict_type=zstandard.DICT_TYPE_RAWCONTENT
            )
            dctx = zstandard.ZstdDecompressor(
                dict_data=reference, max_window_size=1 << MAX_WINDOW_LOG
            )
        data = dctx.decompress(frame, max_output_size=header.size)
    except zstandard.ZstdError as exc:
        raise FrameError(f"its zstd frame cannot be decompressed ({exc})") from exc
    if len(data) != header.size:
        raise FrameError(f"it decompresses to {len(data)} bytes, not {header.size}")
    return data


def _decompress_with_prefix(
    lib_ffi: tuple[Any, Any], header: Header, frame: memoryview, base: bytes | memoryview
) -> Any:
    """A delta's bytes, decoded with `base` as the frame's prefix (what a raw-content
    dictionary is to the decoder, without copying it into one): a CFFI buffer of
    exactly `header.size` bytes; FrameError if the frame does not give that many."""
    _, ffi = lib_ffi
    # one byte more than stated, so a frame that gives more is seen, not cut short
    capacity = header.size + 1
    out = ffi.new_allocator(should_clear_after_alloc=False)("char[]", capacity)
    size = _decompress_to(lib_ffi, header, frame, base, out, capacity)
    if size != header.size:
        raise FrameError(f"it decompresses to {size} bytes, not {header.size}")
    return ffi.buffer(out, size)


def _decoded_into(
    lib_ffi: tuple[Any, Any],
    header: Header,
    frame: memoryview,
    base: bytes | memoryview | None,
    into: memoryview,
    data: bytes,
) -> bool:
    """Whether the frame, decoded into `into` (exactly `header.size` bytes: a frame
    that gives more fails as too large for it), gives `data`."""
    _, ffi = lib_ffi
    out = ffi.from_buffer("char[]", into, require_writable=True)
    try:
        try:
            size = _decompress_to(lib_ffi, header, frame, base, out, len(into))
        except FrameError:
            return False
        return size == header.size == len(data) and bool(ffi.buffer(out, size) == data)
    finally:
        ffi.release(out)  # `into` may be a mapping its owner closes next


def _decompress_to(
    lib_ffi: tuple[Any, Any],
    header: Header,
    frame: memoryview,
    base: bytes | memoryview | None,
    out: Any,
    capacity: int,
) -> int:
    """Decode the frame into `out` (`capacity` bytes), `base` as its prefix (None: a
    keyframe); the number of bytes decoded. FrameError if zstd refuses."""
    lib, ffi = lib_ffi
    dctx = lib.ZSTD_createDCtx()
    if dctx == ffi.NULL:
        raise MemoryError("zstd could not allocate a decompression context")
    try:
        code = lib.ZSTD_DCtx_setParameter(dctx, lib.ZSTD_d_windowLogMax, MAX_WINDOW_LOG)
        if not lib.ZSTD_isError(code) and base is not None:
            code = lib.ZSTD_DCtx_refPrefix(dctx, ffi.from_buffer(base), len(base))
        if lib.ZSTD_isError(code):
            raise FrameError(f"zstd refused the base ({error_name(lib_ffi, code)})")
        size: int = lib.ZSTD_decompressDCtx(dctx, out, capacity, ffi.from_buffer(frame), len(frame))
        if lib.ZSTD_isError(size):
            name = error_name(lib_ffi, size)
            raise FrameError(f"its zstd frame cannot be decompressed ({name})")
    finally:
        lib.ZSTD_freeDCtx(dctx)
    return size


def error_name(lib_ffi: tuple[Any, Any], code: int) -> str:
    lib, ffi = lib_ffi
    name: str = ffi.string(lib.ZSTD_getErrorName(code)).decode()
    return name
