"""Observations (one payload's records, columnar) and the helpers every reader shares."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from feedledger.formats.canonical import (
    columns_needing_escape,
    json_string,
    object_texts,
    quoted,
)
from feedledger.model.errors import BadPayloadError
from feedledger.model.source import SourceConfig

DELETE_FIELD = "_deleted"
OP_FIELD = "op"
TRUE_VALUES = {"true", "1", "yes", "y", "t"}
_MAX_LISTED = 5

# Columns of Observations.frame
OBS_SCHEMA = {
    "idx": pl.UInt32,
    "key": pl.String,
    "hash": pl.Int64,
    "revision": pl.String,
    "deleted": pl.Boolean,
}
# plus "kh": XXH3-64 of the key text, used as the join key (collisions are detected)


@dataclass
class Observations:
    """One payload's records: `frame` has idx (0-based), key, hash, revision, deleted.

    Attribute texts are built on demand (`attributes`) so that a daily ingest only
    materialises the JSON of the rows that actually changed.
    """

    frame: pl.DataFrame
    raw: pl.DataFrame
    attr_columns: list[str] | None  # CSV: string columns; None: raw has "attributes"
    published_values: list[str] | None = None
    # the payload's field names in the order it states them (payloads.fields)
    fields: list[str] | None = None
    # GIS payloads: one row per record in idx order: `geometry_hash` (Int64 hash of the
    # canonical form, formats/spatial/geometry.py; folded into `hash`) and the geometry as
    # stated, either as `geometry` (GeoJSON text) or as `wkb` (WKB, what the readers
    # give: its GeoJSON is made on demand, a daily ingest writes few); null for a
    # feature without one. Read it through `geometries(idx)`, which gives the GeoJSON.
    geometry: pl.DataFrame | None = None
    crs: str | None = None  # the layer's CRS as stated (None: the file states none)
    invalid_geometries: int = 0  # kept as stated, counted and warned about
    # columns of `raw` (among attr_columns) that hold JSON literal text (a typed GIS
    # property: `12`, `true`, `[1,2]`), written as is; the others are quoted strings
    literal_columns: frozenset[str] = frozenset()

    def geometries(self, idx: pl.Series) -> pl.DataFrame:
        """`geometry` (GeoJSON text as stated) and `geometry_hash` for the given 0-based
        record indexes, in that order (a null index, or a payload without geometry,
        gives nulls)."""
        if self.geometry is None:
            return pl.DataFrame(
                {
                    "geometry": pl.Series([None] * idx.len(), dtype=pl.String),
                    "geometry_hash": pl.Series([None] * idx.len(), dtype=pl.Int64),
                }
            )
        if "wkb" not in self.geometry.columns:
            return self.geometry.select(
                pl.col("geometry").gather(idx), pl.col("geometry_hash").gather(idx)
            )
        picked = self.geometry.select(
            pl.col("wkb").gather(idx), pl.col("geometry_hash").gather(idx)
        )
        import shapely  # lazy: a CSV or JSON payload never needs GEOS

        texts = shapely.to_geojson(shapely.from_wkb(picked.get_column("wkb").to_numpy()))
        # as a list: polars cannot cast an object array that starts with None to String
        return pl.DataFrame(
            [
                pl.Series("geometry", texts.tolist(), dtype=pl.String),
                picked.get_column("geometry_hash"),
            ]
        )

    @property
    def height(self) -> int:
        return self.frame.height

    def attributes(self, idx: pl.Series) -> pl.Series:
        """Canonical attribute JSON for the given 0-based record indexes, in that order
        (a null index gives a null text)."""
        # only the wanted rows: callers ask a chunk at a time, so encoding the whole
        # payload per call would repeat it for every chunk
        wanted = idx.drop_nulls()
        texts = self._encode(self._rows(wanted)).alias("attributes")
        if wanted.len() == idx.len():
            return texts
        position = (idx.is_not_null().cast(pl.Int64).cum_sum() - 1).alias("p")
        slots = pl.select(pl.when(idx.is_not_null()).then(position)).to_series()
        return texts.gather(slots).alias("attributes")

    def attribute_rows(self, idx: pl.Series) -> pl.DataFrame | None:
        """The string columns the attribute texts of these 0-based record indexes are
        made of (`attributes` is `object_expr` of them), in that order; None where the
        texts are not made that way (a JSON or typed payload) or an index is null."""
        if self.attr_columns is None or self.literal_columns or idx.null_count():
            return None
        return self._rows(idx).select(self.attr_columns)

    @property
    def on_disk(self) -> bool:
        """Whether the records' rows were spilled to disk (formats/spill.py)."""
        return False

    def keep_rows(self, idx: pl.Series, limit: int) -> None:
        """Hint: the rows of these record indexes will be asked for (a chunk at a time);
        nothing to do where every row is in memory (formats/spill.py keeps them)."""

    def close(self) -> None:
        """Release what the observations hold outside memory (nothing here)."""

    def _rows(self, idx: pl.Series) -> pl.DataFrame:
        """The rows of `raw` at these indexes (no null), in that order: a slice for
        consecutive ones (a first load, written a chunk at a time)."""
        start = _run_start(idx)
        return self.raw.slice(start, idx.len()) if start is not None else self.raw[idx]

    def _encode(self, rows: pl.DataFrame) -> pl.Series:
        if self.attr_columns is None:
            return rows.get_column("attributes")
        if self.literal_columns:
            return rows.select(self._typed_object(rows).alias("attributes")).get_column(
                "attributes"
            )
        return object_texts(rows, self.attr_columns)

    def _typed_object(self, rows: pl.DataFrame) -> pl.Expr:
        """`object_expr` where literal columns are written as they are."""
        columns = self.attr_columns or []
        strings = [c for c in columns if c not in self.literal_columns]
        special = columns_needing_escape(rows.select(strings)) if strings else set()
        pieces: list[pl.Expr] = []
        for i, name in enumerate(sorted(columns)):
            pieces.append(pl.lit(("{" if i == 0 else ",") + json_string(name) + ":"))
            if name in self.literal_columns:
                pieces.append(pl.col(name).fill_null("null"))
            else:
                pieces.extend(quoted(name, rows, special))
        pieces.append(pl.lit("}"))
        return pl.concat_str(pieces) if columns else pl.lit("{}")


def _run_start(idx: pl.Series) -> int | None:
    """The first index when `idx` is a run of consecutive indexes without nulls."""
    if not idx.len() or idx.null_count():
        return None
    first, last = idx[0], idx[-1]
    if last - first + 1 != idx.len() or not (idx.diff().drop_nulls() == 1).all():
        return None
    return int(first)


def row_list(idx: Iterable[int]) -> str:
    items = sorted(set(idx))
    listed = ", ".join(str(i + 1) for i in items[:_MAX_LISTED])
    more = f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else ""
    return f"row{'s' if len(items) > 1 else ''} {listed}{more}"


# an error is one line: payload content quoted in it is clipped, and so is the line
MAX_PROBLEM = 400
_CLIP = 80


def clip(text: str, limit: int = _CLIP) -> str:
    """`text` cut to about `limit` characters (marked with an ellipsis), for quoting
    payload content in an error line."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fail(src: SourceConfig, label: str, problem: str) -> BadPayloadError:
    flat = " ".join(problem.split()) if "\n" in problem or "\r" in problem else problem
    return BadPayloadError(clip(flat, MAX_PROBLEM), source=src.name, payload=label)


# The Unicode White_Space characters (the same set in Python's `re` and polars' regex)
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
BLANK_PATTERN = f"^[{WHITESPACE}]+$"
_BLANK = re.compile(BLANK_PATTERN)


def is_blank(value: object) -> bool:
    """A key value that is a non-empty string of whitespace only."""
    return isinstance(value, str) and _BLANK.match(value) is not None


def blank_key_problem(rows: list[int], src: SourceConfig) -> str:
    return f"{row_list(rows)}: key {list(src.key)} is only whitespace"


def check_utf8(data: bytes, src: SourceConfig, label: str) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise fail(
                src,
                label,
                "the payload is UTF-16 text (it starts with a UTF-16 byte-order mark), not "
                "UTF-8: declare its encoding (source add ... --encoding utf-16 --replace)",
            ) from None
        line = data.count(b"\n", 0, exc.start) + 1
        raise fail(src, label, f"invalid UTF-8 at byte {exc.start} (line {line})") from None


def require_columns(columns: list[str], src: SourceConfig, label: str) -> None:
    missing = [k for k in src.key if k not in columns]
    if missing:
        raise fail(
            src,
            label,
            f"missing key column(s) {missing}; columns present: {_some(columns)}"
            + _other_delimiter(columns, src),
        )
    if src.revision and src.revision not in columns:
        raise fail(
            src,
            label,
            f"missing revision column {src.revision!r}; columns present: {_some(columns)}",
        )


def _other_delimiter(columns: list[str], src: SourceConfig) -> str:
    """A hint when a CSV read as one column holds another delimiter in its name (a tab-
    or semicolon-separated file read with commas)."""
    if src.format != "csv" or len(columns) != 1:
        return ""
    for char, name in (("\t", "tab"), (";", "';'"), ("|", "'|'")):
        if char in columns[0] and char != src.csv_delimiter:
            return (
                f" -- one column whose name holds {name}: a file separated by {name}? "
                f"declare it with --csv-delimiter {name} (source add ... --replace)"
            )
    return ""


def _some(columns: list[str]) -> list[str]:
    return [clip(c, 40) for c in columns[:20]]
