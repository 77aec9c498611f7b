"""`snapshot --format geojson|geoparquet|gpkg`: a GIS source as it stood, as a GIS file.

* **geojson**: a FeatureCollection streamed, each feature written as it is read
  (never the whole collection in memory): `properties` in the source's field order
  with the values as stored (canonical JSON: numbers keep their literal text),
  `geometry` the GeoJSON text stored with the version, verbatim (null for a feature
  without one). No `id` member: the properties carry the key fields. A CRS other than
  WGS 84 stated as an authority code (`EPSG:2232`) is named in the collection's
  `crs` member (the GeoJSON 2008 form GDAL reads and writes); a CRS stated only as WKT
  cannot be named there (GeoParquet and GeoPackage carry it).
* **geoparquet** (GeoParquet 1.1.0) and **gpkg** (GeoPackage): typed columns
  (`columns`: one type per column inferred from the JSON values), a WKB
  `geometry` column, the CRS of the payload in force (`payloads.crs`). A first pass
  reads the rows once from the store, learns the column types, the geometry types
  and the bounding box, and spools the rows (key, attributes, WKB) to an Arrow IPC
  file beside the output; the second pass reads the spool a batch at a time and
  writes the typed batches (ParquetWriter; pyogrio's `write_arrow` over a
  RecordBatchReader). Memory is bounded by the batch size, not by the source.

The output appears under its name only when complete (`snapshot._into_place`).
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import shapely

from feedledger.formats.canonical import canonical, json_string
from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports.columns import ColumnTypes, parse, typed_columns
from feedledger.pipeline.exports.order import ordered

__all__ = ["spool", "write_geojson", "write_geoparquet", "write_gpkg"]

BATCH_ROWS = 10_000
GEOPARQUET_VERSION = "1.1.0"

Row = tuple[str, str, str | None]  # key, attributes JSON, geometry GeoJSON text
_AUTHORITY = re.compile(r"([A-Za-z]+):([0-9]+)")
_WGS84 = {"EPSG:4326", "OGC:CRS84"}
_TYPE_NAMES = (
    "Point",
    "LineString",
    "LinearRing",
    "Polygon",
    "MultiPoint",
    "MultiLineString",
    "MultiPolygon",
    "GeometryCollection",
)
_SPOOL_SCHEMA = pa.schema(
    [("key", pa.string()), ("attributes", pa.string()), ("geometry", pa.binary())]
)


# -- GeoJSON --------------------------------------------------------------------------
def write_geojson(rows: Iterable[Row], handle: IO[str], order: list[str], crs: str | None) -> int:
    """Stream the rows as one FeatureCollection to `handle`; the number of features."""
    head = '{"type":"FeatureCollection",'
    named = _crs_member(crs)
    if named is not None:
        head += '"crs":' + json.dumps(named, separators=(",", ":")) + ","
    handle.write(head + '"features":[')
    n = 0
    for _key, attributes, geometry in rows:
        record = parse(attributes)
        props = ",".join(
            json_string(name) + ":" + canonical(record[name])
            for name in ordered(list(record), order)
        )
        handle.write(
            ("," if n else "")
            + '\n{"type":"Feature","properties":{'
            + props
            + '},"geometry":'
            + (geometry if geometry else "null")
            + "}"
        )
        n += 1
    handle.write("\n]}\n")
    return n


def _crs_member(crs: str | None) -> dict[str, Any] | None:
    """The GeoJSON 2008 `crs` member naming an authority-coded CRS other than WGS 84."""
    if crs is None or crs.upper() in _WGS84:
        return None
    found = _AUTHORITY.fullmatch(crs.strip())
    if found is None:
        return None
    name = f"urn:ogc:def:crs:{found.group(1).upper()}::{found.group(2)}"
    return {"type": "name", "properties": {"name": name}}


# -- the first pass: types, geometry types, extent; the rows spooled ------------------
class Spooled:
    """What the first pass learnt, and the spool file of the rows (key, attributes,
    WKB geometry) in key order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.types = ColumnTypes()
        self.geometry_types: set[str] = set()
        self.bbox: list[float] | None = None
        self.rows = 0
        self.batches = 0

    def columns(self, order: list[str]) -> list[str]:
        return ordered(self.types.fields(), order)

    def batches_of(self, columns: list[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The spooled rows as typed batches of `schema` (`columns` then geometry)."""
        with pa.OSFile(str(self.path), "rb") as handle:
            reader = pa.ipc.open_file(handle)
            for i in range(reader.num_record_batches):
                spooled = reader.get_batch(i)
                records = [parse(a) for a in spooled.column("attributes").to_pylist()]
                arrays = typed_columns(records, columns, self.types)
                arrays.append(spooled.column("geometry"))
                yield pa.record_batch(arrays, schema=schema)

    def schema(self, columns: list[str], geo: dict[str, Any] | None = None) -> pa.Schema:
        fields = [pa.field(name, self.types.arrow_type(name)) for name in columns]
        fields.append(pa.field("geometry", pa.binary()))
        meta = {b"geo": json.dumps(geo).encode()} if geo is not None else None
        return pa.schema(fields, metadata=meta)

    def single_type(self) -> str:
        """The one geometry type of a GeoPackage layer (`Unknown` when mixed)."""
        if len(self.geometry_types) != 1:
            return "Unknown"
        return next(iter(self.geometry_types))


def spool(rows: Iterable[Row], path: Path, batch_rows: int | None = None) -> Spooled:
    """First pass: read every row once, learning types and extent, into `path`, a
    batch of `batch_rows` (default BATCH_ROWS) at a time."""
    batch_rows = batch_rows or BATCH_ROWS
    found = Spooled(path)
    it = iter(rows)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, _SPOOL_SCHEMA) as writer:
        while chunk := list(islice(it, batch_rows)):
            keys = [k for k, _a, _g in chunk]
            attrs = [a for _k, a, _g in chunk]
            for text in attrs:
                found.types.observe(parse(text))
            shapes = _shapes(chunk)
            _extent(found, shapes)
            wkb = shapely.to_wkb(shapes, flavor="iso")
            writer.write_batch(
                pa.record_batch(
                    [
                        pa.array(keys, pa.string()),
                        pa.array(attrs, pa.string()),
                        pa.array(wkb, pa.binary()),
                    ],
                    schema=_SPOOL_SCHEMA,
                )
            )
            found.rows += len(chunk)
            found.batches += 1
    return found


def _shapes(chunk: list[Row]) -> Any:
    texts = [g if g and g != "null" else None for _k, _a, g in chunk]
    try:
        return shapely.from_geojson(np.array(texts, dtype=object))
    except shapely.errors.GEOSException:
        pass
    for (key, _a, _g), text in zip(chunk, texts, strict=True):  # name the one at fault
        try:
            shapely.from_geojson(text)
        except shapely.errors.GEOSException as exc:
            raise ConfigError(
                f"entity {key}: its stored geometry cannot be written as WKB "
                f"({' '.join(str(exc).split())})",
                hint="--format geojson writes geometries as stated",
            ) from None
    raise AssertionError("unreachable: the batch failed but no geometry does")


def _extent(found: Spooled, shapes: Any) -> None:
    present = shapes[~shapely.is_missing(shapes) & ~shapely.is_empty(shapes)]
    if present.size == 0:
        return
    ids = shapely.get_type_id(present)
    zs = shapely.has_z(present)
    for type_id, has_z in set(zip(ids.tolist(), zs.tolist(), strict=True)):
        name = _TYPE_NAMES[type_id] if type_id != 2 else "LineString"
        found.geometry_types.add(f"{name} Z" if has_z else name)
    bounds = shapely.bounds(present)
    box = [
        float(np.nanmin(bounds[:, 0])),
        float(np.nanmin(bounds[:, 1])),
        float(np.nanmax(bounds[:, 2])),
        float(np.nanmax(bounds[:, 3])),
    ]
    if found.bbox is None:
        found.bbox = box
    else:
        old = found.bbox
        found.bbox = [
            min(old[0], box[0]),
            min(old[1], box[1]),
            max(old[2], box[2]),
            max(old[3], box[3]),
        ]


# -- GeoParquet -----------------------------------------------------------------------
def geo_metadata(found: Spooled, crs: str | None) -> dict[str, Any]:
    """The GeoParquet `geo` metadata of the one WKB column `geometry`."""
    column: dict[str, Any] = {
        "encoding": "WKB",
        "geometry_types": sorted(found.geometry_types),
        # no CRS stated: unknown (null), not the GeoParquet default OGC:CRS84
        "crs": projjson(crs) if crs else None,
    }
    if found.bbox is not None:
        column["bbox"] = found.bbox
    return {
        "version": GEOPARQUET_VERSION,
        "primary_column": "geometry",
        "columns": {"geometry": column},
    }


def write_geoparquet(found: Spooled, target: Path, order: list[str], crs: str | None) -> int:
    import pyarrow.parquet as pq  # lazy: GeoParquet only (a GeoJSON stream needs none)

    columns = found.columns(order)
    schema = found.schema(columns, geo_metadata(found, crs))
    with pq.ParquetWriter(str(target), schema) as writer:
        for batch in found.batches_of(columns, schema):
            writer.write_batch(batch)
    return found.rows


# -- GeoPackage -----------------------------------------------------------------------
def write_gpkg(found: Spooled, target: Path, order: list[str], crs: str | None, layer: str) -> int:
    import pyogrio  # lazy: GDAL, for GeoPackage and PROJJSON only

    columns = found.columns(order)
    schema = found.schema(columns)
    reader = pa.RecordBatchReader.from_batches(schema, found.batches_of(columns, schema))
    with warnings.catch_warnings():
        # GDAL warns that a file name lacks the .gpkg extension (the part file's);
        # pyogrio that no CRS is given (none was stated: the layer says so itself)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        try:
            pyogrio.write_arrow(
                reader,
                str(target),
                layer=layer,
                driver="GPKG",
                geometry_name="geometry",
                geometry_type=found.single_type(),
                crs=crs,
            )
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot write the GeoPackage: {_one_line(exc)}") from None
    return found.rows


@lru_cache(maxsize=32)
def _projjson_text(crs: str) -> str | None:
    """PROJJSON of a CRS given as an authority code or WKT, by GDAL (the one bundled
    with pyogrio, through an in-memory GeoPackage: no pyproj needed); None if GDAL
    cannot read it."""
    import pyogrio  # lazy: GDAL, for GeoPackage and PROJJSON only

    table = pa.table({"geometry": pa.array([], pa.binary())})
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            pyogrio.write_arrow(
                table, buffer, driver="GPKG", layer="crs", geometry_name="geometry",
                geometry_type="Unknown", crs=crs,
            )  # fmt: skip
            meta, read = pyogrio.read_arrow(buffer.getvalue())
        except (RuntimeError, ValueError):
            return None
    name = meta.get("geometry_name") or "geom"
    field_meta = read.schema.field(name).metadata or {}
    ext = json.loads(field_meta.get(b"ARROW:extension:metadata", b"{}") or b"{}")
    found = ext.get("crs")
    return json.dumps(found) if isinstance(found, dict) else None


def projjson(crs: str) -> dict[str, Any] | None:
    text = _projjson_text(crs)
    return json.loads(text) if text is not None else None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
