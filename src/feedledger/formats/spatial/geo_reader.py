"""GIS payloads read into Observations: a feature's properties are its record, its
geometry is kept beside them (columnar throughout; no per-feature Python loop).

* **the layer**: `formats.spatial.gis.read_gis` (GeoJSON, GeoJSON sequence, zipped shapefile,
  GeoPackage, zipped File Geodatabase, FlatGeobuf) or `formats.spatial.geoparquet` gives an
  Arrow table of the properties, as the file types them, plus a WKB `geometry`.
* **the record**: the properties as canonical JSON (`formats.typed_columns`): the same
  key text, attribute text and content hash as the JSON reader gives the same values
  (an integer is its digits, a string is quoted); `--key` names properties.
* **the geometry**: `Observations.geometry` holds, per feature, its WKB as stated (its
  GeoJSON text, Z kept, never reprojected, is made on demand by
  `Observations.geometries` for the rows written: a daily ingest writes few) and the
  hash of its canonical form
  (`formats.spatial.geometry`: snapped to the source's `geometry_grid`, normalised, a
  single-part multi equal to its part). The content hash folds the geometry hash in
  after the properties: `mix(mix(h, 4), geometry_hash)` (0 for no geometry), so a
  ring rotated or reversed is no change and a vertex moved beyond the grid is one.
  Features are matched by key, never by their order in the file.
* **invalid geometry** (a self-intersecting ring...) is kept as stated and counted
  (`invalid_geometries`), never refused or repaired.
* **a geographic layer** (longitude/latitude: a GeoJSON without `crs`, EPSG:4326,
  NAD83...) whose coordinates leave +-180 / +-90 is refused (`formats.spatial.geographic`):
  projected metres labelled as degrees.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import polars as pl
import pyarrow as pa

from feedledger.formats.observations import (
    BLANK_PATTERN,
    DELETE_FIELD,
    OBS_SCHEMA,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    blank_key_problem,
    clip,
    fail,
    row_list,
)
from feedledger.formats.spatial.geographic import check_geographic_range
from feedledger.formats.spatial.geometry import hash_wkb
from feedledger.formats.spatial.geoparquet import read_geoparquet
from feedledger.formats.spatial.gis import GisTable, read_gis
from feedledger.formats.typed_columns import (
    TypedTexts,
    fold,
    key_expr,
    typed_hashes,
    typed_texts,
)
from feedledger.model.errors import BadPayloadError
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind

__all__ = ["GEOMETRY_TAG", "assemble", "observations_of", "read_geo", "require_fields"]

GEOMETRY_TAG = 4  # folded before the geometry hash (1-3 are the field tags)
_GEOMETRY = "geometry"


def read_geo(data: bytes, src: SourceConfig, label: str) -> Observations:
    """A GIS payload of `src` (its `format`, `layer`, `geometry_grid`) as Observations.
    Raises BadPayloadError on any bad input."""
    if src.format == "geoparquet":
        gis = read_geoparquet(data, source=src.name, payload=label)
    else:
        gis = read_gis(
            data,
            src.format,
            layer=src.layer,
            source=src.name,
            payload=label,
            max_bytes=src.max_payload_bytes,
        )
    return observations_of(gis, src, label)


def observations_of(gis: GisTable, src: SourceConfig, label: str) -> Observations:
    """`gis` (properties + WKB `geometry`) as Observations of `src`."""
    table = gis.table
    fields = [c for c in table.column_names if c != _GEOMETRY]
    if table.num_rows:
        require_fields(fields, src, label)
    else:  # no features (GDAL then knows no fields): an empty payload, as in JSON
        wanted = [*src.key, *([src.revision] if src.revision else [])]
        for name in dict.fromkeys(n for n in wanted if n not in fields):
            table = table.append_column(name, pa.nulls(0, pa.string()))
    with ThreadPoolExecutor(max_workers=2) as pool:  # meanwhile: the properties
        geometry = table.column(_GEOMETRY)
        hashing = pool.submit(hash_wkb, geometry, src.geometry_grid)
        ranging = pool.submit(check_geographic_range, geometry, gis.crs, src, label)
        try:
            texts = typed_texts(table.drop_columns([_GEOMETRY]))
        except BadPayloadError as exc:  # (a column whose values cannot be read)
            hashing.cancel()
            ranging.cancel()
            raise fail(src, label, exc.problem) from None
        try:
            gh, invalid_count = hashing.result()
        except BadPayloadError as exc:
            raise fail(src, label, exc.problem) from None
        ranging.result()  # a geographic layer's coordinates within +-180 / +-90
    wkb = pl.from_arrow(table.column(_GEOMETRY))
    assert isinstance(wkb, pl.Series)
    shapes = pl.DataFrame([wkb.alias("wkb"), gh])
    return assemble(texts, fields, shapes, invalid_count, gis.crs, src, label)


def assemble(
    texts: TypedTexts,
    fields: list[str],
    shapes: pl.DataFrame,
    invalid_count: int,
    crs: str | None,
    src: SourceConfig,
    label: str,
) -> Observations:
    """The Observations of a layer whose property texts (`typed_texts`: one column per
    field, `fields` in the layer's order, plus any key field an empty layer lacks) and
    geometry (`shapes`: `wkb` or its GeoJSON text `geometry`, and `geometry_hash`) are
    made: the key and its checks, the content hashes. `formats.spatial.geo_pages` assembles a
    layer read a page at a time with it."""
    raw = texts.frame
    _check_key_values(texts, src, label)
    changes = src.kind == PayloadKind.CHANGES
    attr_columns = [c for c in fields if not (changes and c in (DELETE_FIELD, OP_FIELD))]
    h = typed_hashes(texts, attr_columns)
    h = fold(h, pl.Series([GEOMETRY_TAG], dtype=pl.UInt64))
    h = fold(h, shapes.get_column("geometry_hash").reinterpret(signed=False).fill_null(0))
    revision = pl.col(src.revision) if src.revision else pl.lit(None, dtype=pl.String)
    frame = (
        raw.select(
            key_expr(texts, list(src.key)).alias("key"),
            pl.lit(h.reinterpret(signed=True)).alias("hash"),
            revision.alias("revision"),
            _deleted_expr(fields, changes).alias("deleted"),
        )
        .with_row_index("idx")
        .cast(OBS_SCHEMA)  # type: ignore[arg-type]
        .with_columns(hash_expr(pl.col("key")).alias("kh"))
    )
    published = src.published_from.field
    values = (
        raw.get_column(published).drop_nulls().unique().sort().to_list()
        if published and published in fields
        else None
    )
    return Observations(
        frame=frame,
        raw=raw,
        attr_columns=attr_columns,
        published_values=values,
        fields=fields,
        geometry=shapes,
        crs=crs,
        invalid_geometries=invalid_count,
        literal_columns=texts.literal & frozenset(attr_columns),
    )


def require_fields(fields: list[str], src: SourceConfig, label: str) -> None:
    """The key (and revision) fields are among `fields`, else BadPayloadError."""
    present = [clip(c, 40) for c in fields[:20]]
    missing = [k for k in src.key if k not in fields]
    if missing:
        raise fail(src, label, f"missing key field(s) {missing}; fields present: {present}")
    if src.revision and src.revision not in fields:
        raise fail(
            src, label, f"missing revision field {src.revision!r}; fields present: {present}"
        )


def _check_key_values(texts: TypedTexts, src: SourceConfig, label: str) -> None:
    """Null or empty key values, then whitespace-only ones: the JSON reader's errors."""
    raw = texts.frame
    strings = [k for k in src.key if k not in texts.literal]
    empty = [pl.col(k).is_null() for k in src.key] + [pl.col(k) == "" for k in strings]
    found = raw.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"), pl.any_horizontal(empty).alias("e")
    ).filter(pl.col("e"))
    if found.height:
        rows = found["i"].to_list()
        raise fail(src, label, f"{row_list(rows)}: null or empty key {list(src.key)}")
    if strings:
        blank = raw.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"),
            pl.any_horizontal([pl.col(k).str.contains(BLANK_PATTERN) for k in strings]).alias("b"),
        ).filter(pl.col("b"))
        if blank.height:
            raise fail(src, label, blank_key_problem(blank["i"].to_list(), src))


def _deleted_expr(fields: list[str], changes: bool) -> pl.Expr:
    """A changes payload's delete markers (`_deleted` true/1/yes..., `op` = d)."""
    markers = []
    if changes and DELETE_FIELD in fields:
        markers.append(pl.col(DELETE_FIELD).str.to_lowercase().is_in(list(TRUE_VALUES)))
    if changes and OP_FIELD in fields:
        markers.append(pl.col(OP_FIELD).str.to_lowercase() == "d")
    if not markers:
        return pl.lit(False)
    return pl.any_horizontal(markers).fill_null(False)
