"""A GIS source's geometry reaches its destinations: the document carries it as GeoJSON
(a `geometry` member), the table's `geometry_wkb` column as WKB, a transform receives it,
and a change of the geometry alone reaches the destination -- by the live route and by a
rebuild alike. A non-GIS source's documents and table keep their shape exactly. Every
store backend (`cli`) x every destination kind (`place`)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import shapely
from sqlalchemy import create_engine, inspect, text

from helpers import Cli, write_csv

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, url or path, table) for a fresh destination table, dropped afterwards."""
    table = f"g_{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "dest.db"), table
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL destination not tested: set {PG_ENV}")
    yield "postgres", url, table
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def _engine(place: tuple[str, str, str]) -> Any:
    kind, url, _table = place
    if kind == "sqlite":
        return create_engine(f"sqlite:///{url}")
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def held(place: tuple[str, str, str]) -> dict[str, tuple[Any, Any, bool]]:
    """key -> (document, geometry_wkb as a shapely geometry or None, deleted)."""
    engine = _engine(place)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(f"SELECT key, doc, geometry_wkb, deleted FROM {place[2]}"))
            out = {}
            for key, doc, wkb, deleted in rows:
                body = json.loads(doc) if isinstance(doc, str) else doc
                shape = None if wkb is None else shapely.from_wkb(bytes(wkb))
                out[json.loads(key)[0]] = (body, shape, bool(deleted))
            return out
    finally:
        engine.dispose()


def columns(place: tuple[str, str, str]) -> set[str]:
    engine = _engine(place)
    try:
        return {c["name"] for c in inspect(engine).get_columns(place[2])}
    finally:
        engine.dispose()


def square(x: float, y: float) -> dict[str, Any]:
    ring = [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1], [x, y]]
    return {"type": "Polygon", "coordinates": [ring]}


def ingest(cli: Cli, tmp_path: Path, day: str, features: dict[str, Any]) -> None:
    feats = [
        {"type": "Feature", "properties": {"parcel_id": k, "zone": z}, "geometry": g}
        for k, (z, g) in features.items()
    ]
    path = tmp_path / f"zoning_{day}.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    cli("ingest", "zoning", str(path), "--published-at", day)


def declare(cli: Cli, place: tuple[str, str, str], source: str, *extra: str) -> None:
    kind, url, table = place
    cli("destination", "add", "d", "--source", source, f"--{kind}", url, "--table", table,
        *extra)  # fmt: skip


def recorded_transform(version: dict[str, Any]) -> dict[str, Any]:
    """Writes what a transform receives into its document."""
    return {"zone": version["attributes"]["zone"], "got": sorted(version), "g": version["geometry"]}


DAY1 = {"P1": ("R1", square(0, 0)), "P2": ("C2", square(5, 5)), "P3": ("R1", None)}
MOVED = {**DAY1, "P1": ("R1", square(10, 10))}  # P1's geometry alone changes


def test_geometry_travels_by_rebuild_and_live_route(
    cli: Cli, tmp_path: Path, place: tuple[str, str, str]
) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", DAY1)
    declare(cli, place, "zoning")
    assert "geometry_wkb" in columns(place)
    cli("manifest", "create", "all", "--source", "zoning")
    assert cli.json("sync", "d", "--manifest", "all")["outcomes"]["accepted"] == 3
    rows = held(place)
    assert rows["P1"][0] == {"parcel_id": "P1", "zone": "R1", "geometry": square(0, 0)}
    assert rows["P1"][1].equals(shapely.geometry.shape(square(0, 0)))
    assert rows["P3"][0] == {"parcel_id": "P3", "zone": "R1", "geometry": None}
    assert rows["P3"][1] is None
    # the geometry alone changes: the live route carries it
    ingest(cli, tmp_path, "2026-08-02", MOVED)
    live = cli.json("sync", "d", "--live", "--once")
    assert live["outcomes"]["accepted"] == 1, live
    rows = held(place)
    assert rows["P1"][0]["geometry"] == square(10, 10)
    assert rows["P1"][1].equals(shapely.geometry.shape(square(10, 10)))
    assert rows["P2"][0]["geometry"] == square(5, 5)
    # a rebuild at the new boundary sees nothing to change; a delete is a tombstone
    cli("manifest", "create", "now", "--source", "zoning")
    again = cli.json("sync", "d", "--manifest", "now")
    assert again["outcomes"]["already_current"] == 3, again
    assert cli.json("reconcile", "d", "--manifest", "now")["complete"] is True
    ingest(cli, tmp_path, "2026-08-03", {k: v for k, v in MOVED.items() if k != "P2"})
    cli.json("sync", "d", "--live", "--once")
    body, shape, deleted = held(place)["P2"]
    assert deleted and body is None and shape is None


def test_a_transform_receives_the_geometry_and_the_hash_sees_it(
    cli: Cli,
    tmp_path: Path,
    place: tuple[str, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", DAY1)
    declare(cli, place, "zoning", "--transform", "test_destination_geometry:recorded_transform")
    cli("manifest", "create", "all", "--source", "zoning")
    cli.json("sync", "d", "--manifest", "all")
    body, shape, _ = held(place)["P1"]
    assert body["got"] == ["attributes", "deleted", "geometry", "key", "revision", "valid_from"]
    assert body["g"] == square(0, 0) and shape.equals(shapely.geometry.shape(square(0, 0)))
    ingest(cli, tmp_path, "2026-08-02", MOVED)
    assert cli.json("sync", "d", "--live", "--once")["outcomes"]["accepted"] == 1
    body, shape, _ = held(place)["P1"]
    assert body["g"] == square(10, 10) and shape.equals(shapely.geometry.shape(square(10, 10)))


def test_a_non_gis_source_keeps_its_documents_and_table(
    cli: Cli, tmp_path: Path, place: tuple[str, str, str]
) -> None:
    cli("source", "add", "plain", "--key", "id")
    path = write_csv(tmp_path / "plain_2026-08-01.csv", ["id", "name"], [["a", "x"], ["b", "y"]])
    cli("ingest", "plain", str(path))
    declare(cli, place, "plain")
    cli("manifest", "create", "all", "--source", "plain")
    cli.json("sync", "d", "--manifest", "all")
    assert "geometry_wkb" not in columns(place)
    engine = _engine(place)
    try:
        with engine.connect() as conn:
            docs = dict(conn.execute(text(f"SELECT key, doc FROM {place[2]}")).all())
    finally:
        engine.dispose()
    got = {json.loads(k)[0]: (json.loads(v) if isinstance(v, str) else v) for k, v in docs.items()}
    assert got == {"a": {"id": "a", "name": "x"}, "b": {"id": "b", "name": "y"}}


def test_with_a_revision_field_a_move_reaches_it_with_a_newer_revision(
    cli: Cli, tmp_path: Path, place: tuple[str, str, str]
) -> None:
    """A move under the same revision is held by the ledger (`unresolved` there: the
    geometry is part of the content), so the destination keeps the old one; a newer
    revision with a move reaches it."""
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson",
        "--revision", "rev")  # fmt: skip

    def day(d: str, rev: int, geometry: dict[str, Any]) -> None:
        feats = [{"type": "Feature", "properties": {"parcel_id": "P1", "rev": rev},
                  "geometry": geometry}]  # fmt: skip
        path = tmp_path / f"zoning_{d}.geojson"
        path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
        cli("ingest", "zoning", str(path), "--published-at", d)

    day("2026-08-01", 1, square(0, 0))
    declare(cli, place, "zoning")
    cli("manifest", "create", "all", "--source", "zoning")
    cli.json("sync", "d", "--manifest", "all")
    day("2026-08-02", 1, square(3, 3))
    assert sum(cli.json("sync", "d", "--live", "--once")["outcomes"].values()) == 0
    assert held(place)["P1"][1].equals(shapely.geometry.shape(square(0, 0)))  # untouched
    day("2026-08-03", 2, square(4, 4))
    assert cli.json("sync", "d", "--live", "--once")["outcomes"]["accepted"] == 1
    assert held(place)["P1"][0]["geometry"] == square(4, 4)


def test_the_content_hash_covers_the_geometry_whatever_the_transform() -> None:
    from feedledger.sync.transform import build
    from feedledger.sync.versions import VersionRow

    def doc(geometry: dict[str, Any] | None, transform: Any = None, geo: bool = True) -> Any:
        row = VersionRow('["P1"]', '{"zone":"R1"}', None, False, 7, 0,
                         None if geometry is None else json.dumps(geometry))  # fmt: skip
        return build(row, transform=transform, generation="M-1", rank=1,
                     use_revision_field=False, geo=geo)  # fmt: skip

    here, there = doc(square(0, 0)), doc(square(1, 1))
    assert here.content_hash != there.content_hash and here.doc != there.doc
    blind = lambda v: {"zone": v["attributes"]["zone"]}  # noqa: E731  (ignores the geometry)
    a, b = doc(square(0, 0), blind), doc(square(1, 1), blind)
    assert a.doc == b.doc and a.content_hash != b.content_hash
    assert doc(None).doc == '{"zone":"R1","geometry":null}'
    assert doc(square(0, 0), geo=False).doc == '{"zone":"R1"}'  # not GIS: its shape exactly
