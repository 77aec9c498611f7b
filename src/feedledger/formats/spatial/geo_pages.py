"""An ArcGIS layer read a page at a time while it downloads (`PageReader`), giving the
same Observations as reading the archived GeoJSON sequence whole (`geo_reader.read_geo`).

The connector (`sources.arcgis_query.download`) hands each page's checked lines to
`PageReader.page`; a worker thread reads the page exactly as the whole payload is read
(`gis.read_gis` on those lines: GDAL's GeoJSON driver, the same open options), hashes
its canonical geometries (`geometry.hash_wkb`) and writes each geometry's GeoJSON text
(what `Observations.geometries` would make from the WKB, made now; a daily run keeps
the WKB instead and writes the text of the few geometries it writes). The client is
mostly idle while the server renders the next page, so this work is nearly free;
after the last page only `observations` is left: the pages' property tables joined,
their texts (`typed_columns`), the key checks and content hashes (`geo_reader.assemble`).

GDAL types each field from the features it reads, so a page alone may type a field
otherwise than the whole layer does. The whole layer's type is what every page's
reading unifies to, and the pages are joined only where that is known:

* a column that is null throughout a page says nothing (GDAL types it as a string
  there and ignores nulls when it types the whole): it takes the others' type;
* integer widths (int32, int64) widen to int64 and integers beside reals become
  reals, as GDAL promotes them (an integer's text is its digits either way; a real's
  is the float's);
* anything else that differs -- a field one page lacks, other field names or order, a
  string beside a number, booleans beside integers, another CRS -- and any page GDAL
  cannot read: `observations` answers None and the caller reads the archived payload
  whole (`read_observations`), as replay and `archive reindex` do. Nothing is guessed.

`tests/formats/spatial/test_geo_pages.py` checks the equality (hypothesis over awkward pages:
nulls, ints beside reals, a field missing on one page, booleans, big integers).
"""

from __future__ import annotations

import codecs
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

import polars as pl
import pyarrow as pa
import shapely

from feedledger.formats.observations import Observations
from feedledger.formats.spatial.geo_reader import assemble, require_fields
from feedledger.formats.spatial.geographic import check_geographic_range
from feedledger.formats.spatial.geometry import hash_wkb
from feedledger.formats.spatial.gis import read_gis
from feedledger.formats.typed_columns import typed_texts
from feedledger.model.source import SourceConfig

__all__ = ["PageReader", "page_reader"]

_GEOMETRY = "geometry"
_SLICE = 200  # features hashed (and written as GeoJSON) between two yields of the GIL


@dataclass(frozen=True)
class _Page:
    """One page read: its properties (as GDAL typed them), geometry hashes and texts."""

    properties: pa.Table
    geometry_hash: pl.Series
    geometry: pl.Series  # `geometry`: GeoJSON text of each (null for none); or `wkb`
    invalid: int
    crs: str | None


def page_reader(src: SourceConfig, *, geometry_text: bool = True) -> PageReader | None:
    """A reader for `src`'s pages where its payload is an ArcGIS layer's GeoJSON
    sequence in UTF-8 (what the connector archives); None otherwise. `geometry_text`:
    write every geometry's GeoJSON text meanwhile (a first load writes them all; a
    daily run, which writes few, keeps the WKB and writes only those)."""
    if src.connector != "arcgis" or src.format != "geojsonseq":
        return None
    if codecs.lookup(src.encoding).name != "utf-8":  # as decode_text: read as it is
        return None
    return PageReader(src, geometry_text=geometry_text)


class PageReader:
    """Reads each page on a worker thread as it arrives (see the module docstring).
    A context manager: leaving it drops what is still queued and stops the thread."""

    def __init__(self, src: SourceConfig, *, geometry_text: bool = True) -> None:
        self.src = src
        self.geometry_text = geometry_text
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="geo-page")
        self._pages: list[Future[_Page]] = []

    def __enter__(self) -> PageReader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.restart()
        self._pool.shutdown(wait=True)

    def restart(self) -> None:
        """The download starts over: the pages read so far are dropped."""
        for future in self._pages:
            future.cancel()
        self._pages = []

    def page(self, lines: list[str]) -> None:
        """The next page's lines (one GeoJSON Feature each), read on the worker."""
        if lines:
            self._pages.append(self._pool.submit(self._read, lines))

    def _read(self, lines: list[str]) -> _Page:
        # one text of the page, then its bytes (no second copy of the text with the last
        # newline added), freed once GDAL has read them: the page's size at a time
        data = "\n".join([*lines, ""]).encode("utf-8")
        gis = read_gis(data, self.src.format, layer=self.src.layer, source=self.src.name,
                       payload="page", max_bytes=self.src.max_payload_bytes)  # fmt: skip
        del data
        column = gis.table.column(_GEOMETRY).combine_chunks()
        # out of range: the whole read names the rows (observations answers None)
        check_geographic_range(column, gis.crs, self.src, "page")
        hashes: list[pl.Series] = []
        texts: list[pl.Series] = []  # a slice's texts at a time: no list of every str
        invalid = 0
        # a slice at a time, the GIL let go between slices: the download's thread,
        # waiting on it to read the next answer, never waits long (a whole page's
        # hashes held it up to ~0.2 s, and the server idled meanwhile)
        for start in range(0, len(column), _SLICE):
            part = column.slice(start, _SLICE)
            part_hashes, part_invalid = hash_wkb(part, self.src.geometry_grid)
            hashes.append(part_hashes)
            invalid += part_invalid
            if self.geometry_text:  # as Observations.geometries writes it from the WKB
                shapes = shapely.from_wkb(part.to_numpy(zero_copy_only=False))
                # through a list: polars refuses an object array led by a None
                texts.append(
                    pl.Series(_GEOMETRY, shapely.to_geojson(shapes).tolist(), dtype=pl.String)
                )
            time.sleep(0)
        if self.geometry_text:
            geometry = (
                pl.concat(texts, rechunk=True)
                if texts
                else pl.Series(_GEOMETRY, [], dtype=pl.String)
            )
        else:
            geometry = pl.Series("wkb", column, dtype=pl.Binary)
        return _Page(
            properties=gis.table.drop_columns([_GEOMETRY]),
            geometry_hash=pl.concat(hashes, rechunk=True) if hashes else _no_hashes(),
            geometry=geometry,
            invalid=invalid,
            crs=gis.crs,
        )

    def observations(self, label: str) -> Observations | None:
        """The layer's Observations from its pages, equal to reading the archived
        payload whole; None where that equality is not known (module docstring) or a
        page could not be read -- the caller then reads the payload whole, which names
        any problem as it always does."""
        try:
            pages = [future.result() for future in self._pages]
        except Exception:  # the whole read reports it
            return None
        if not pages or len({p.crs for p in pages}) != 1:
            return None
        properties = _joined([p.properties for p in pages])
        if properties is None or not properties.num_rows:
            return None
        fields = list(properties.column_names)
        require_fields(fields, self.src, label)
        shapes = pl.DataFrame(
            [
                pl.concat([p.geometry for p in pages], rechunk=True),
                pl.concat([p.geometry_hash for p in pages], rechunk=True),
            ]
        )
        invalid = sum(p.invalid for p in pages)
        return assemble(typed_texts(properties), fields, shapes, invalid, pages[0].crs,
                        self.src, label)  # fmt: skip


def _no_hashes() -> pl.Series:
    return pl.Series("geometry_hash", [], dtype=pl.Int64)


def _joined(tables: list[pa.Table]) -> pa.Table | None:
    """The pages' property tables as one, each field of the type the whole layer's
    reading gives it; None where that type is not known (module docstring)."""
    names = tables[0].column_names
    if any(t.column_names != names for t in tables[1:]):
        return None
    schema: list[pa.Field] = []
    for i, name in enumerate(names):
        kind = _unified([t.column(i) for t in tables])
        if kind is None:
            return None
        schema.append(pa.field(name, kind))
    target = pa.schema(schema)
    cast = [t if t.schema.equals(target) else _cast(t, target) for t in tables]
    return pa.concat_tables(cast)


def _unified(columns: list[pa.ChunkedArray]) -> pa.DataType | None:
    kinds = {c.type for c in columns if c.null_count < len(c)}
    if not kinds:  # null throughout: every page typed it alike (else not known)
        kinds = {c.type for c in columns}
        return kinds.pop() if len(kinds) == 1 else None
    if len(kinds) == 1:
        return kinds.pop()
    if all(pa.types.is_integer(k) and pa.types.is_signed_integer(k) for k in kinds):
        return pa.int64()
    if all(pa.types.is_signed_integer(k) or pa.types.is_float64(k) for k in kinds):
        return pa.float64()
    return None


def _cast(table: pa.Table, target: pa.Schema) -> pa.Table:
    columns = [
        column if column.type == field.type else _cast_column(column, field.type)
        for column, field in zip(table.columns, target, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=target)


def _cast_column(column: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray:
    if column.null_count == len(column):
        return pa.chunked_array([pa.nulls(len(column), kind)], type=kind)
    return column.cast(kind, safe=False)  # an integer as GDAL makes it a real
