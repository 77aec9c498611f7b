"""GeoParquet read into Arrow (pure; pyarrow only): the same `GisTable` as
`formats.spatial.gis.read_gis` gives, properties as columns plus a WKB `geometry`.

A GeoParquet file is a Parquet file whose schema metadata holds a `geo` JSON document
(https://geoparquet.org): `primary_column` names the geometry column, its `encoding`
must be `WKB` (the native GeoArrow encodings of 1.1 are refused, clearly), and its
`crs` is PROJJSON. The CRS is recorded as stated: `AUTHORITY:CODE` when the PROJJSON
has an `id` (`EPSG:2232`), else the PROJJSON's JSON text; a column without a `crs`
member is, by the specification, `OGC:CRS84` (longitude/latitude on WGS 84), and one
whose `crs` is null states no CRS (None). Other geometry columns, if any, are
properties like any other (WKB as base64 text).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from feedledger.formats.compressed import not_parquet
from feedledger.formats.spatial.gis import GisTable
from feedledger.model.errors import BadPayloadError

__all__ = ["GEO_METADATA_KEY", "geo_metadata", "read_geoparquet"]

GEO_METADATA_KEY = b"geo"
DEFAULT_CRS = "OGC:CRS84"
_GEOMETRY = "geometry"


def geo_metadata(schema: pa.Schema) -> dict[str, Any] | None:
    """The schema's GeoParquet `geo` document (None when it has none or it is not a
    JSON object)."""
    raw = (schema.metadata or {}).get(GEO_METADATA_KEY)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def read_geoparquet(data: bytes, *, source: str, payload: str) -> GisTable:
    """The GeoParquet file `data` (BadPayloadError, one line, when it is not one)."""

    def bad(problem: str) -> BadPayloadError:
        return BadPayloadError(problem, source=source, payload=payload)

    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()
    except (pa.ArrowException, OSError, ValueError, MemoryError) as exc:
        why = not_parquet(data) or _one_line(exc)
        raise bad(f"not a readable GeoParquet file: {why}") from None
    names = table.column_names
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})[:5]
        raise bad(f"duplicate column name(s) in the Parquet schema: {dupes}")
    geo = geo_metadata(table.schema)
    if geo is None:
        raise bad(
            "no GeoParquet 'geo' metadata in the Parquet schema (a plain Parquet file? "
            "use --format parquet)"
        )
    primary = geo.get("primary_column")
    columns = geo.get("columns")
    if not isinstance(primary, str) or not isinstance(columns, dict) or primary not in columns:
        raise bad("the GeoParquet 'geo' metadata names no primary geometry column")
    if primary not in names:
        raise bad(f"the GeoParquet primary geometry column {primary!r} is not in the file")
    column_meta = columns[primary] if isinstance(columns[primary], dict) else {}
    encoding = str(column_meta.get("encoding", "WKB"))
    if encoding.upper() != "WKB":
        raise bad(
            f"the GeoParquet geometry column {primary!r} is encoded as {encoding!r}; "
            "only WKB is read"
        )
    if primary != _GEOMETRY and _GEOMETRY in names:
        raise bad(
            f"a property named 'geometry' beside the geometry column {primary!r}; the two "
            "cannot both be kept under that name"
        )
    geometry = table.column(primary)
    if isinstance(geometry.type, pa.BaseExtensionType):
        geometry = pa.chunked_array(
            [c.storage for c in geometry.chunks], type=geometry.type.storage_type
        )
    if not (pa.types.is_binary(geometry.type) or pa.types.is_large_binary(geometry.type)):
        raise bad(f"the GeoParquet geometry column {primary!r} is {geometry.type}, not WKB binary")
    index = names.index(primary)
    table = table.set_column(index, pa.field(_GEOMETRY, pa.binary()), geometry.cast(pa.binary()))
    types = column_meta.get("geometry_types")
    return GisTable(
        table=table.replace_schema_metadata(None),
        crs=_crs(column_meta),
        layer=primary,
        geometry_type=",".join(map(str, types)) if isinstance(types, list) and types else None,
    )


def _crs(column_meta: dict[str, Any]) -> str | None:
    if "crs" not in column_meta:
        return DEFAULT_CRS
    crs = column_meta["crs"]
    if crs is None:
        return None
    if isinstance(crs, str):
        return crs
    ident = crs.get("id") if isinstance(crs, dict) else None
    if isinstance(ident, dict) and "authority" in ident and "code" in ident:
        return f"{ident['authority']}:{ident['code']}"
    return json.dumps(crs, separators=(",", ":"), ensure_ascii=False)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
