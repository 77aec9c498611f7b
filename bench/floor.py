"""The floor: read a CSV snapshot and hash every row, with the same libraries as the ingest.

    python bench/floor.py FILE

No ingest can be faster than merely reading its payload and computing one content hash
per row, so this is the yardstick daily ingests are compared with. It does exactly that,
with the same libraries and the same hash as `feedledger ingest`:

1. ``polars.read_csv(FILE, infer_schema=False, empty_string_is_null=False)`` (all text);
2. one content hash per row: XXH3-64 of every field through ``polars_hash``, folded per
   row in column-name order exactly as ``feedledger.formats.canonical`` documents (inlined
   here so only polars and polars-hash are imported), plus the key hash of one column.

It is meant to run as a whole process (the benchmark measures its wall time and peak RSS
from outside), so interpreter start-up and imports count, as they do for ``feedledger``.
It prints one JSON object: rows, columns and the in-process timings of each step.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402

import polars as pl  # noqa: E402
import polars_hash  # noqa: E402, F401  (registers the ``nchash`` namespace)

# The content-hash fold of feedledger.formats.canonical, inlined so that the floor imports
# nothing but polars and polars-hash (the same algorithm, constants and libraries).
SEED, PRIME, TAG_STRING = 0x243F6A8885A308D3, 0x9E3779B97F4A7C15, 2


def _u64(value: int) -> pl.Expr:
    return pl.lit(value, dtype=pl.UInt64)


def _xxh(text: pl.Expr) -> pl.Expr:
    return text.nchash.xxh3_64()  # type: ignore[attr-defined,no-any-return]


def string_record_hash_expr(columns: list[str]) -> pl.Expr:
    names = pl.DataFrame({"n": sorted(columns)}).select(_xxh(pl.col("n")))["n"].to_list()
    h = _u64(SEED)
    for name, name_h in zip(sorted(columns), names, strict=True):
        for x in (_u64(name_h), _u64(TAG_STRING), _xxh(pl.col(name))):
            h = (h ^ x) * _u64(PRIME)
    return h.reinterpret(signed=True)


def hash_expr(text: pl.Expr) -> pl.Expr:
    return _xxh(text).reinterpret(signed=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = argv[0]
    t_imported = time.perf_counter()
    df = pl.read_csv(path, infer_schema=False, empty_string_is_null=False)
    t_read = time.perf_counter()
    out = df.select(
        string_record_hash_expr(list(df.columns)).alias("row_hash"),
        hash_expr(pl.col(df.columns[0])).alias("key_hash"),
    )
    hashes = out["row_hash"]
    t_hashed = time.perf_counter()
    if hashes.null_count():
        raise SystemExit("floor.py: null row hash (a null field?)")
    result = {
        "file": path,
        "rows": df.height,
        "columns": df.width,
        "imports_s": round(t_imported - T_START, 4),
        "read_s": round(t_read - t_imported, 4),
        "hash_s": round(t_hashed - t_read, 4),
        "in_process_s": round(t_hashed - T_START, 4),
        # A checksum of all row hashes, so the work cannot be skipped and runs can be compared.
        "checksum": int(hashes.sum() or 0) % (1 << 64),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
