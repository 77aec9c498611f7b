"""Every destination kind, as the tests see it: where a fresh one is (`kind_place`
fixture, in conftest.py), how to declare it, and what it shows its users -- read back
with a reader feedledger did not write: SQLAlchemy over the table for the SQL kinds,
GDAL (pyogrio) over the GeoPackage, as QGIS reads it; tantivy's own searcher over the
index (sync/tantivy_index.py). A new kind (a search index,
PostGIS) adds its place and its reader here and joins every test of
test_destination_kinds.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import shapely
from sqlalchemy import create_engine, text

from helpers import Cli
from sync import tantivy_index

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"
KINDS = ["sqlite", "postgres", "gpkg", "tantivy", "postgis"]

Place = tuple[str, str, str]  # (kind, URL or file, table or layer)


def declare(cli: Cli, place: Place, source: str, *extra: str) -> None:
    kind, url, table = place
    if kind == "tantivy":
        cli("destination", "add", "d", "--source", source, "--tantivy", url,
            "--text-fields", "zone", *extra)  # fmt: skip
        return
    where = "--layer" if kind == "gpkg" else "--table"
    cli("destination", "add", "d", "--source", source, f"--{kind}", url, where, table, *extra)


def _engine(place: Place) -> Any:
    kind, url, _table = place
    if kind in ("sqlite", "gpkg"):
        return create_engine(f"sqlite:///{url}")
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def features(place: Place, key: str = "parcel_id") -> dict[str, tuple[dict[str, Any], Any]]:
    """What a user of the destination sees: each present record's attributes and
    geometry (shapely; None for none), by its `key` attribute."""
    kind, url, table = place
    if kind == "tantivy":
        return tantivy_index.features(url, key)
    if kind == "gpkg":
        import pyogrio

        meta, got = pyogrio.read_arrow(url, layer=table)
        rows = got.to_pylist()
        geom = meta.get("geometry_name") or "geom"
        out = {}
        for r in rows:
            wkb = r.pop(geom, None)
            attrs = {k: v for k, v in r.items() if not k.startswith("fl_") and v is not None}
            out[str(attrs[key])] = (attrs, None if wkb is None else shapely.from_wkb(wkb))
        return out
    if kind == "postgis":
        return postgis_features(place, key)
    engine = _engine(place)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(f'SELECT doc, geometry_wkb FROM "{table}" WHERE NOT deleted')
            ).all()
    finally:
        engine.dispose()
    out = {}
    for doc, wkb in rows:
        body = json.loads(doc) if isinstance(doc, str) else doc
        body.pop("geometry", None)
        out[str(body[key])] = (body, None if wkb is None else shapely.from_wkb(bytes(wkb)))
    return out


GUARD = {
    "key",
    "revision",
    "generation",
    "generation_rank",
    "content_hash",
    "deleted",
    "written_at",
}


def postgis_features(place: Place, key: str) -> dict[str, tuple[dict[str, Any], Any]]:
    """A PostGIS table as QGIS reads it: its columns but the guard's, and the geometry
    as PostGIS returns it (`ST_AsBinary`, read back by psycopg)."""
    _kind, _url, table = place
    engine = _engine(place)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(f'SELECT *, ST_AsBinary(geom) AS fl_wkb FROM "{table}" WHERE NOT deleted')
            ).all()
    finally:
        engine.dispose()
    out = {}
    for r in rows:
        m = dict(r._mapping)
        wkb = m.pop("fl_wkb")
        attrs = {k: v for k, v in m.items() if k not in GUARD and k != "geom" and v is not None}
        out[str(attrs[key])] = (attrs, None if wkb is None else shapely.from_wkb(bytes(wkb)))
    return out


def canonical(shape: Any) -> bytes | None:
    """A geometry's canonical WKB (normalised, single parts as themselves): equal for
    the same shape whatever its encoding."""
    if shape is None:
        return None
    if shape.geom_type.startswith("Multi") and len(shape.geoms) == 1:
        shape = shape.geoms[0]
    return bytes(shapely.to_wkb(shapely.normalize(shape), flavor="iso", output_dimension=2))


def remove_row(place: Place, key: str) -> None:
    """Break the destination behind feedledger's back: the record's row is gone."""
    kind, url, table = place
    if kind == "tantivy":
        tantivy_index.remove(url, json.dumps([key]))
        return
    engine = _engine(place)
    try:
        with engine.begin() as conn:
            column = "fl_key" if kind == "gpkg" else "key"
            conn.execute(
                text(f'DELETE FROM "{table}" WHERE {column} = :k'), {"k": json.dumps([key])}
            )
    finally:
        engine.dispose()


def write_day(tmp_path: Path, day: str, parcels: dict[str, tuple[str, Any]]) -> Path:
    feats = [
        {"type": "Feature", "properties": {"parcel_id": k, "zone": z}, "geometry": g}
        for k, (z, g) in parcels.items()
    ]
    path = tmp_path / f"zoning_{day}.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def square(x: float, y: float, size: float = 1.0) -> dict[str, Any]:
    ring = [[x, y], [x + size, y], [x + size, y + size], [x, y + size], [x, y]]
    return {"type": "Polygon", "coordinates": [ring]}


def parcels(n: int, shift: float = 0.0) -> dict[str, tuple[str, Any]]:
    """n parcels P00..: a zone and a unit square each (P07 a two-part MultiPolygon)."""
    out: dict[str, tuple[str, Any]] = {}
    for i in range(n):
        geom = square(i + shift, i % 5)
        if i == 7:
            parts = [square(i, 0)["coordinates"], square(i, 3)["coordinates"]]
            geom = {"type": "MultiPolygon", "coordinates": parts}
        out[f"P{i:02d}"] = (f"R{i % 3}", geom)
    return out
