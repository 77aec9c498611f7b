"""GIS files read into Arrow: GeoJSON, GeoJSON sequence, zipped shapefile, GeoPackage,
zipped File Geodatabase, FlatGeobuf (pure reading; no I/O beyond GDAL's memory files).

The bytes are handed to pyogrio (its wheel bundles GDAL), which reads them through a
`/vsimem/` file and returns the layer as an Arrow table: no per-feature Python loop.
The properties become columns as pyogrio types them; the geometry becomes a plain WKB
`binary` column named `geometry`, kept as the file states it (canonicalisation for
comparison is `formats.spatial.geometry`'s business, not this module's). The CRS is the layer's
as stated (`EPSG:4326`, or WKT when GDAL finds no authority code; `None` when the file
states none), never reprojected.

Zips are opened with `zipfile` first, in memory, so a truncated zip or a shapefile
missing one of its parts is named before GDAL sees it (GDAL would read a shapefile
without its `.dbf` as geometry without properties, silently). The parts that matter
are repacked, uncompressed, at the root of a new in-memory zip: a shapefile's
`.shp/.shx/.dbf/.prj/.cpg` wherever they sit in the archive, a File Geodatabase's
`NAME.gdb/` folder (GDAL opens a zip of the folder's *contents*, not of the folder).

Every failure is a one-line `BadPayloadError` naming source, payload and problem.
"""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyogrio
import pyogrio.raw

from feedledger.formats.finite import FeatureGeometryError, check_geojson_finite
from feedledger.formats.spatial.gis_zip import gdb_folders, listing, member_names, repack
from feedledger.model.errors import BadPayloadError

__all__ = ["GIS_FORMATS", "GisTable", "detect_gis_format", "read_gis"]

# format -> the GDAL drivers whose reading of the bytes is accepted for it. The two
# GeoJSON flavours accept each other: GDAL tells them apart by content (a sequence of
# one feature is plain GeoJSON), and either reading gives the same features.
GIS_FORMATS: dict[str, frozenset[str]] = {
    "geojson": frozenset({"GeoJSON", "GeoJSONSeq"}),
    "geojsonseq": frozenset({"GeoJSONSeq", "GeoJSON"}),
    "shapefile": frozenset({"ESRI Shapefile"}),
    "gpkg": frozenset({"GPKG"}),
    "filegdb": frozenset({"OpenFileGDB"}),
    "flatgeobuf": frozenset({"FlatGeobuf"}),
}
_ZIPPED = ("shapefile", "filegdb")
_ONE_LAYER = ("geojson", "geojsonseq", "flatgeobuf")  # formats that hold one layer
_VSI_PATH = re.compile(r"'?(/vsi[a-z]+/)+\S*?pyogrio_[0-9a-f]+\S*?'?(?=[\s.;,:]|$)")
# pyogrio's DataSourceError/DataLayerError (and their CRS/feature/geometry/field
# kinds) are RuntimeErrors; GDAL's own failures surface as these three
_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")  # a blank or whitespace-only line
_PROBE_BYTES = 65_536  # GDAL identifies a JSON file's driver from far fewer
_READ_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, ValueError, OSError)


@dataclass(frozen=True)
class GisTable:
    """One layer of a GIS file: properties as columns plus WKB `geometry`."""

    table: pa.Table
    crs: str | None
    layer: str
    geometry_type: str | None


def detect_gis_format(name: str, data: bytes) -> str | None:
    """The GIS format `name`'s extension states, where unambiguous; else `None`.
    A bare `.zip` is a shapefile when it holds a `.shp`, a File Geodatabase when it
    holds a `NAME.gdb/` folder (and neither when it holds both or none)."""
    lower = name.lower()
    for suffix, fmt in (
        (".gdb.zip", "filegdb"),
        (".shp.zip", "shapefile"),
        (".geojson", "geojson"),
        (".geojsonl", "geojsonseq"),
        (".geojsons", "geojsonseq"),
        (".gpkg", "gpkg"),
        (".fgb", "flatgeobuf"),
    ):
        if lower.endswith(suffix):
            return fmt
    if not lower.endswith(".zip"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = member_names(zf)
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    has_shp = any(n.lower().endswith(".shp") for n in names)
    has_gdb = bool(gdb_folders(names))
    if has_shp != has_gdb:
        return "shapefile" if has_shp else "filegdb"
    return None


def read_gis(
    data: bytes,
    fmt: str,
    *,
    layer: str | None = None,
    source: str,
    payload: str,
    max_bytes: int | None = None,
) -> GisTable:
    """Layer `layer` (or the only layer) of `data`, a file of format `fmt`. A zipped
    format whose parts add up to more than `max_bytes` uncompressed is refused unread
    (a decompression bomb?).
    BadPayloadError (one line) for unreadable bytes, a zip that is truncated or lacks a
    part, several layers and no `layer` named, or an unknown `layer` (both list the
    layers)."""

    def bad(problem: str) -> BadPayloadError:
        return BadPayloadError(problem, source=source, payload=payload)

    drivers = GIS_FORMATS.get(fmt)
    if drivers is None:
        raise bad(f"unknown GIS format {fmt!r} (one of {', '.join(GIS_FORMATS)})")
    if _looks_like_html(data):
        raise bad(f"an HTML page, not a {fmt} file (a login or error page?)")
    probe: bytes | None = None  # what GDAL identifies the driver and layer name from
    if fmt in _ZIPPED:
        data = repack(data, fmt, bad, max_bytes)
    elif fmt in ("geojson", "geojsonseq") and _is_feature_sequence(data):
        probe = _as_feature_collection(_leading_records(data))
        data = _as_feature_collection(data)
    if fmt in ("geojson", "geojsonseq"):
        try:
            check_geojson_finite(data)
        except FeatureGeometryError as exc:
            raise bad(exc.problem) from None
    with warnings.catch_warnings():
        # GDAL warns that a /vsimem/ name lacks the GeoPackage extension; harmless
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            info: dict[str, Any]
            if fmt in _ONE_LAYER:  # opening GeoJSON parses it all: once fewer
                # a sequence: its leading records, which begin the FeatureCollection
                # exactly as the whole does, so GDAL picks the same driver (it decides
                # from the first kilobytes) without parsing every feature an extra time
                info = pyogrio.read_info(data if probe is None else probe, layer=0)
                layers = [_layer_name(info.get("layer_name"), fmt)]
            else:
                layers = [_layer_name(name, fmt) for name in pyogrio.list_layers(data)[:, 0]]
            if not layers:
                raise bad(f"no layers in this {fmt} file")
            if layer is None:
                if len(layers) > 1:
                    raise bad(
                        f"the {fmt} file has {len(layers)} layers ({listing(layers)}); "
                        "name one with --layer"
                    )
                layer = layers[0]
            elif layer not in layers:
                raise bad(f"no layer {layer!r} in the {fmt} file (layers: {listing(layers)})")
            index = layers.index(layer)  # by position: see above
            if fmt not in _ONE_LAYER:
                info = pyogrio.read_info(data, layer=index)
            driver = str(info.get("driver"))
            if driver not in drivers:
                raise bad(f"not a {fmt} file (GDAL reads it as {driver})")
            meta, table = pyogrio.read_arrow(data, layer=index, **_open_options(driver))
            if driver not in ("GeoJSON", "GeoJSONSeq"):  # (their text is checked above)
                table = _points_as_stored(table, meta, data, index)
            elif meta.get("crs") in (None, "EPSG:4326"):
                _check_stated_crs(data, bad)
        except _READ_ERRORS as exc:
            if fmt in ("geojson", "geojsonseq"):  # a coordinate GDAL cannot read (1e309)?
                try:
                    check_geojson_finite(data, unreadable=True)
                except FeatureGeometryError as inner:
                    raise bad(inner.problem) from None
            raise bad(f"not a readable {fmt} file: {_one_line(exc)}") from exc
    geometry_name = meta.get("geometry_name") or "wkb_geometry"
    if "geometry" in table.column_names and geometry_name != "geometry":
        # GDAL's own name for an unnamed geometry (GeoJSON's) is not the user's word
        beside = (
            "beside the features' geometry"
            if geometry_name == "wkb_geometry"
            else f"beside its geometry column {geometry_name!r}"
        )
        raise bad(
            f"layer {layer!r} has a property named 'geometry' {beside}; the two cannot "
            "both be kept under that name (rename the property)"
        )
    return GisTable(
        table=_with_geometry(table, meta),
        crs=meta.get("crs") or None,
        layer=layer,
        geometry_type=meta.get("geometry_type") or None,
    )


def _layer_name(name: object, fmt: str) -> str:
    """GDAL names a layer-less format's one layer after the file: pyogrio's random
    /vsimem/ name, different on each call; shown as the format's name."""
    text = "" if name is None else str(name)
    return fmt if not text or text.startswith("pyogrio_") else text


def _is_feature_sequence(data: bytes) -> bool:
    """A GeoJSON text sequence: RS-separated (RFC 8142), or a first line that is a whole
    Feature by itself (newline-delimited). A FeatureCollection, on one line or many,
    is not one."""
    head = data.lstrip()
    if head.startswith(b"\x1e"):
        return True
    end = head.find(b"\n")
    try:
        first = json.loads(head if end < 0 else head[:end])
    except ValueError:
        return False
    return isinstance(first, dict) and first.get("type") == "Feature"


def _leading_records(data: bytes) -> bytes:
    """The sequence's records that begin within its first `_PROBE_BYTES` (whole)."""
    if len(data) <= _PROBE_BYTES:
        return data
    end = data.find(b"\x1e" if b"\x1e" in data[:_PROBE_BYTES] else b"\n", _PROBE_BYTES)
    return data if end < 0 else data[:end]


def _as_feature_collection(data: bytes) -> bytes:
    """The sequence's features as one FeatureCollection, for GDAL's GeoJSON driver: its
    GeoJSONSeq driver has no DATE_AS_STRING and would type a date-looking string as a
    date (and print it anew); blank records are skipped."""
    head, tail = b'{"type":"FeatureCollection","features":[', b"]}"
    body = data.strip()
    # one record per line, none blank (what the ArcGIS connector archives): the newlines
    # become the commas, in one pass (JSON allows whitespace either side; not a vertical
    # tab or form feed, which `strip` removes around a record)
    if not any(c in body for c in (b"\x1e", b"\x0b", b"\x0c")) and not _BLANK_LINE.search(body):
        return head + body.replace(b"\n", b",") + tail
    separator = b"\x1e" if b"\x1e" in data else b"\n"
    records = [r.strip() for r in data.split(separator)]
    return head + b",".join(r for r in records if r) + tail


def _open_options(driver: str) -> dict[str, str]:
    """GDAL open options: GeoJSON's date-looking strings stay the strings stated (GDAL
    would otherwise type `"2024-01-02T03:04:05Z"` as a datetime and print it anew)."""
    return {"DATE_AS_STRING": "YES"} if driver == "GeoJSON" else {}


# a top-level GeoJSON 2008 `crs` member: an object nesting one object (`properties`)
_CRS_MEMBER = re.compile(rb'"crs"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})')


def _check_stated_crs(data: bytes, bad: Callable[[str], BadPayloadError]) -> None:
    """A GeoJSON whose `crs` member names a CRS GDAL does not know (`EPSG:99999`, a
    `link`) is read by GDAL as WGS84 without a word: refused, naming what it states,
    so that its coordinates are not taken for degrees. Only the text before the
    features and after the last `]` is searched (where a top-level member sits)."""
    from feedledger.sources.arcgis_query import WGS84_NAME, crs_name  # lazy: httpx

    features = data.find(b'"features"')
    regions = (data[: features if features >= 0 else _PROBE_BYTES], data[data.rfind(b"]") :])
    for region in regions:
        found = _CRS_MEMBER.search(region)
        if found is None:
            continue
        try:
            crs = json.loads(found.group(1))
        except ValueError:
            crs = found.group(1).decode("utf-8", "replace")
        name = crs_name(crs)
        if name is not None and WGS84_NAME.fullmatch(name):
            return
        stated = name or json.dumps(crs, ensure_ascii=False, separators=(",", ":"))[:120]
        raise bad(
            f"the GeoJSON's crs member names {stated}, no CRS feedledger knows (read as it "
            "stands, its coordinates would be taken for WGS84 longitude/latitude); state a "
            "known CRS such as EPSG:3857, or convert the layer to EPSG:4326 first "
            "(ogr2ogr -t_srs EPSG:4326)"
        )


_NAN_LE = b"\x00\x00\x00\x00\x00\x00\xf8\x7f"  # a quiet NaN double, little-endian


def _points_as_stored(table: pa.Table, meta: dict[str, Any], data: bytes, index: int) -> pa.Table:
    """`table` whose geometries are the file's as stored. GDAL's Arrow reading of a
    shapefile or FlatGeobuf writes a point with one NaN ordinate as an empty point (both
    NaN): kept so, a NaN coordinate would become an empty geometry without a word.
    Where a NaN shows at all (rare), the geometries are read again by GDAL's feature
    reader, which keeps every ordinate, so `formats.spatial.geometry` refuses the NaN."""
    name = meta.get("geometry_name") or "wkb_geometry"
    kind = str(meta.get("geometry_type") or "Unknown")
    if name not in table.column_names or any(k in kind for k in ("LineString", "Polygon")):
        return table  # lines and polygons keep their NaN ordinates (refused later)
    column = table.column(name)  # (chunks of pyogrio's batch size: each searched alone)
    chunks = [c.storage if isinstance(c, pa.ExtensionArray) else c for c in column.chunks]
    if not any(_NAN_LE in c.buffers()[2].to_pybytes() for c in chunks if c.buffers()[2]):
        return table
    geometries = pyogrio.raw.read(data, layer=index, columns=[], read_geometry=True)[2]
    if geometries is None or len(geometries) != table.num_rows:
        return table
    stored = pa.array(list(geometries), type=pa.binary())
    return table.set_column(table.column_names.index(name), pa.field(name, pa.binary()), stored)


def _with_geometry(table: pa.Table, meta: dict[str, Any]) -> pa.Table:
    """`table` with its geometry column as plain WKB `binary` named `geometry`
    (pyogrio names it after the file's column and tags it geoarrow.wkb)."""
    name = meta.get("geometry_name") or "wkb_geometry"
    if name not in table.column_names:
        name = "wkb_geometry"
    if name not in table.column_names:  # a layer without geometry
        return table.append_column("geometry", pa.nulls(table.num_rows, pa.binary()))
    index = table.column_names.index(name)
    column = table.column(index)
    if isinstance(column.type, pa.ExtensionType):
        column = pa.chunked_array(
            [chunk.storage for chunk in column.chunks], type=column.type.storage_type
        )
    column = column.cast(pa.binary())
    return table.set_column(index, pa.field("geometry", pa.binary()), column)


def _looks_like_html(data: bytes) -> bool:
    head = data[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head[:200]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    # GDAL names pyogrio's random in-memory file and suggests a driver prefix: noise here
    text = _VSI_PATH.sub("the payload", text).split("; It might help", 1)[0]
    text = text.replace(
        "the payload not recognized as being in a supported file format.",
        "the bytes are in no format GDAL reads",
    )
    return text if len(text) <= 300 else text[:297] + "..."
