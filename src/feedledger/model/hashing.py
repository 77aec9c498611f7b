"""The content/key hash as a Polars expression (pure; no I/O).

XXH3-64 (seed 0) of the UTF-8 bytes of a canonical text, stored as a signed 64-bit
integer (the unsigned value reinterpreted). See formats/canonical.py for the texts.
"""

from __future__ import annotations

import polars as pl
import polars_hash  # noqa: F401  (registers the `nchash` namespace)


def hash_expr(text: pl.Expr) -> pl.Expr:
    hashed: pl.Expr = text.nchash.xxh3_64()  # type: ignore[attr-defined]
    return hashed.reinterpret(signed=True)


def with_key_hash(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `kh` (hash of the canonical key text) if the frame lacks it."""
    if "kh" in frame.columns:
        return frame
    return frame.with_columns(hash_expr(pl.col("key")).alias("kh"))
