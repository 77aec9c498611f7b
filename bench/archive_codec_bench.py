"""What a delta costs (issue 17 target 5): day 2 of gen_parcels.py's series compressed
against day 1, in this process, every way considered for `archive/codec.py`:

* ``dictionary lazy``: day 1 as a raw-content dictionary, a lazy strategy with a hash
  table sized for it (the delta form before the change; python-zstandard's C backend);
* ``dictionary fast`` / ``dictionary lazy threads=2``: the same, cheaper strategy / two
  worker threads;
* ``prefix+LDM level L``: zstd's patch-from -- day 1 as the frame's prefix
  (``ZSTD_CCtx_refPrefix``, through python-zstandard's CFFI backend) with long-distance
  matching (the form written now, level 1); ``prefix, no LDM``; ``prefix+LDM 2 workers``;
* keyframes (no base) at levels 3, 1 and -1.

Each: stored size (of day 2's bytes), CPU seconds (process time: user + sys of this
process, threads included) and wall seconds, median of ``--repeat``; every delta is
decoded back and compared. The load average is printed: wall times on a shared machine
move with it, CPU seconds much less::

    python bench/archive_codec_bench.py --n 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))

from archive_bench import generate
from feedledger.archive import codec

Encode = Callable[[bytes, bytes], bytes]


def dictionary(strategy: int, threads: int = 0, **kw: int) -> Encode:
    def encode(data: bytes, base: bytes) -> bytes:
        params = zstandard.ZstdCompressionParameters(
            window_log=codec.window_log(len(base), len(data)),
            strategy=strategy,
            write_checksum=1,
            write_content_size=1,
            threads=threads,
            **kw,
        )
        ref = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        out: bytes = zstandard.ZstdCompressor(dict_data=ref, compression_params=params).compress(
            data
        )
        return out

    return encode


def prefix(level: int, ldm: bool = True, workers: int = 0) -> Encode:
    def encode(data: bytes, base: bytes) -> bytes:
        found = codec._libzstd()
        assert found is not None, "python-zstandard's CFFI backend is missing"
        lib, ffi = found
        cctx = lib.ZSTD_createCCtx()
        try:
            for param, value in (
                (lib.ZSTD_c_compressionLevel, level),
                (lib.ZSTD_c_windowLog, codec.window_log(len(base), len(data))),
                (lib.ZSTD_c_enableLongDistanceMatching, 1 if ldm else 0),
                (lib.ZSTD_c_nbWorkers, workers),
                (lib.ZSTD_c_checksumFlag, 1),
            ):
                assert not lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, param, value))
            assert not lib.ZSTD_isError(
                lib.ZSTD_CCtx_refPrefix(cctx, ffi.from_buffer(base), len(base))
            )
            cap = lib.ZSTD_compressBound(len(data))
            dst = ffi.new_allocator(should_clear_after_alloc=False)("char[]", cap)
            size = lib.ZSTD_compress2(cctx, dst, cap, ffi.from_buffer(data), len(data))
            assert not lib.ZSTD_isError(size)
            out: bytes = ffi.buffer(dst, size)[:]
            return out
        finally:
            lib.ZSTD_freeCCtx(cctx)

    return encode


def keyframe(level: int) -> Encode:
    def encode(data: bytes, _base: bytes) -> bytes:
        compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
        out: bytes = compressor.compress(data)
        return out

    return encode


S = zstandard
WAYS: dict[str, tuple[Encode, bool]] = {
    "dictionary lazy (before)": (
        dictionary(S.STRATEGY_LAZY, hash_log=24, chain_log=18, search_log=1, min_match=6),
        True,
    ),
    "dictionary lazy threads=2": (
        dictionary(S.STRATEGY_LAZY, 2, hash_log=24, chain_log=18, search_log=1, min_match=6),
        True,
    ),
    "dictionary fast hash_log 24": (dictionary(S.STRATEGY_FAST, hash_log=24, min_match=6), True),
    "prefix+LDM level 3": (prefix(3), True),
    "prefix+LDM level 1 (now)": (prefix(1), True),
    "prefix+LDM level -1": (prefix(-1), True),
    "prefix+LDM level 3, 2 workers": (prefix(3, workers=2), True),
    "prefix, no LDM, level 3": (prefix(3, ldm=False), True),
    "keyframe level 3 (before)": (keyframe(3), False),
    "keyframe level 1 (now)": (keyframe(1), False),
    "keyframe level -1": (keyframe(-1), False),
}


def measure(encode: Encode, data: bytes, base: bytes, repeat: int) -> tuple[dict[str, Any], bytes]:
    cpu, wall = [], []
    out = b""
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = encode(data, base)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return {"size": len(out), "cpu": statistics.median(cpu), "wall": statistics.median(wall)}, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="parcels a day (%(default)s)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data", type=Path, help="gen_parcels.py --out (default: its cache)")
    args = p.parse_args(argv)
    days = generate(args.n, 2, 3600.0, args.data)
    base, data = (Path(d["path"]).read_bytes() for d in days)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"day 2: {len(data):,} bytes, base {len(base):,}; load {load}\n")
    print("| encoding | stored | of day 2 | CPU s | wall s |\n|---|---:|---:|---:|---:|")
    dctx_ref = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    for name, (encode, is_delta) in WAYS.items():
        found, out = measure(encode, data, base, args.repeat)
        reader = (
            zstandard.ZstdDecompressor(dict_data=dctx_ref, max_window_size=1 << 31)
            if is_delta
            else zstandard.ZstdDecompressor()
        )
        assert reader.decompress(out, max_output_size=len(data)) == data, name
        print(
            f"| {name} | {found['size']:,} | {found['size'] / len(data):.3%} | "
            f"{found['cpu']:.2f} | {found['wall']:.2f} |",
            flush=True,
        )
    print(f"\nload after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
