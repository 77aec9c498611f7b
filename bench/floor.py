"""The floor: read a CSV snapshot and hash every row, with the same libraries as the ingest.

    python bench/floor.py FILE

No ingest can be faster than merely reading its payload and computing one content hash
per row, so this is the yardstick daily ingests are compared with. It does exactly that:

1. ``polars.read_csv(FILE, infer_schema=False, empty_string_is_null=False)`` (all text);
2. for every row, the canonical JSON text of the row -- keys sorted, compact,
   ``{"col":"value",...}``, values JSON-escaped -- built with ``pl.concat_str``;
3. one ``xxh3_64`` per row through ``polars_hash`` (``pl.col(...).nchash.xxh3_64()``).

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
import polars_hash  # noqa: E402, F401  (registers the ``nchash`` expression namespace)

# Characters that need a JSON escape (RFC 8259: quotation mark, reverse solidus, controls).
# Columns are checked all at once, in one parallel pass; a column holding none of them (the
# common case) is used as is, so its only cost is that scan.
_SPECIAL = ['"', "\\"] + [chr(i) for i in range(0x20)]
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(df: pl.DataFrame, col: str) -> pl.Expr:
    expr = pl.col(col).str.replace_all("\\", "\\\\", literal=True)
    expr = expr.str.replace_all('"', '\\"', literal=True)
    s = df.get_column(col)
    if not s.str.contains_any(_SPECIAL[2:]).any():
        return expr
    if s.str.contains_any([c for c in _SPECIAL[2:] if c not in _SHORT_ESCAPES]).any():
        # Rare enough not to matter for speed: let the json module do it, dropping quotes.
        return pl.col(col).map_elements(
            lambda v: json.dumps(v, ensure_ascii=False)[1:-1], return_dtype=pl.String
        )
    for ch, esc in _SHORT_ESCAPES.items():
        expr = expr.str.replace_all(ch, esc, literal=True)
    return expr


def canonical_json_expr(df: pl.DataFrame) -> pl.Expr:
    """``{"a":"...","b":"..."}`` per row, keys sorted, as one string expression."""
    cols = sorted(df.columns)
    flags = df.select(pl.col(c).str.contains_any(_SPECIAL).any() for c in cols).row(0)
    parts: list[pl.Expr] = []
    for i, (col, special) in enumerate(zip(cols, flags, strict=True)):
        key = json.dumps(col, ensure_ascii=False)
        parts.append(pl.lit(("{" if i == 0 else ",") + key + ':"'))
        parts.append(_escaped(df, col) if special else pl.col(col))
        parts.append(pl.lit('"'))
    parts.append(pl.lit("}"))
    return pl.concat_str(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = argv[0]
    t_imported = time.perf_counter()
    df = pl.read_csv(path, infer_schema=False, empty_string_is_null=False)
    t_read = time.perf_counter()
    hashes = df.select(canonical_json_expr(df).nchash.xxh3_64().alias("row_hash"))["row_hash"]
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
