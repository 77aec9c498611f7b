"""The PostGIS destination as its users see it (the guarantees -- verdicts, tombstones,
interruption, reconcile -- are test_destination_kinds.py's, over every kind): a layer
QGIS reads (`geometry_columns` names its type and SRID, a GiST index, a primary key
from the source's key, typed lower-case columns), geometry read back with
`ST_AsBinary` equal as canonical WKB to the ledger's state (`snapshot`), the columns
following the source's members, `--srid` reprojecting, clear refusals, and the SQL
recipe of docs/postgis_asof.sql answering the layer as of a date from the ledger.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import shapely
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from helpers import Cli
from sync.destination_kinds import PG_ENV, Place, canonical, features, square

pytestmark = pytest.mark.skipif(not os.environ.get(PG_ENV), reason=f"set {PG_ENV}")
ASOF_SQL = Path(__file__).resolve().parents[2] / "docs" / "postgis_asof.sql"


def _engine(url: str) -> Any:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.fixture
def gis_place() -> Iterator[Place]:
    url = os.environ[PG_ENV]
    table = f"g_{uuid.uuid4().hex[:12]}"
    engine = _engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS postgis"))
    yield "postgis", url, table
    with engine.begin() as conn:
        conn.execute(text(f'DROP TABLE IF EXISTS "{table}"'))
    engine.dispose()


def write(tmp_path: Path, day: str, feats: dict[str, tuple[dict[str, Any], Any]]) -> Path:
    body = [
        {"type": "Feature", "properties": {"parcel_id": k, **props}, "geometry": g}
        for k, (props, g) in feats.items()
    ]
    path = tmp_path / f"lots_{day}.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": body}))
    return path


def day1() -> dict[str, tuple[dict[str, Any], Any]]:
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    for i in range(8):
        props = {"Zone": f"R{i % 3}", "acres": 0.5 + i, "units": i, "vacant": i % 2 == 0}
        out[f"L{i}"] = (props, square(i, i % 4, 0.5))
    return out


def ingest(cli: Cli, tmp_path: Path, day: str, feats: dict[str, Any]) -> None:
    cli("ingest", "lots", str(write(tmp_path, day, feats)), "--published-at", day)


def rows(place: Place, sql: str, **params: Any) -> list[Any]:
    engine = _engine(place[1])
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())
    finally:
        engine.dispose()


def columns(place: Place) -> dict[str, str]:
    got = rows(
        place,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = :t",
        t=place[2],
    )
    return {r[0]: r[1] for r in got}


def snapshot(cli: Cli, valid: str) -> dict[str, tuple[dict[str, Any], Any]]:
    """The ledger's state at `valid`, as `snapshot --format geojson` writes it."""
    out = json.loads(cli("snapshot", "lots", "--valid", valid, "--format", "geojson").stdout)
    return {
        f["properties"]["parcel_id"]: (
            f["properties"],
            None if f["geometry"] is None else shapely.geometry.shape(f["geometry"]),
        )
        for f in out["features"]
    }


def declare_and_rebuild(cli: Cli, place: Place, *extra: str) -> None:
    _kind, url, table = place
    cli("destination", "add", "d", "--source", "lots", "--postgis", url, "--table", table, *extra)
    cli("manifest", "create", "m1", "--source", "lots")
    cli.json("sync", "d", "--manifest", "m1")


def test_the_table_is_a_typed_layer_qgis_reads_with_the_ledgers_geometry(
    cli: Cli, tmp_path: Path, gis_place: Place
) -> None:
    cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", day1())
    declare_and_rebuild(cli, gis_place)
    table = gis_place[2]
    meta = rows(
        gis_place,
        "SELECT type, srid, coord_dimension FROM geometry_columns WHERE f_table_name = :t",
        t=table,
    )
    assert [tuple(m) for m in meta] == [("POLYGON", 4326, 2)]
    index = rows(gis_place, "SELECT indexdef FROM pg_indexes WHERE tablename = :t", t=table)
    assert any("USING gist (geom)" in r[0] for r in index), index
    pk = rows(
        gis_place,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = CAST(:t AS regclass) AND i.indisprimary",
        t=f'"{table}"',
    )
    assert [r[0] for r in pk] == ["parcel_id"]
    cols = columns(gis_place)
    assert cols["parcel_id"] == "text" and cols["zone"] == "text"
    assert cols["acres"] == "double precision" and cols["units"] == "bigint"
    assert cols["vacant"] == "boolean" and cols["geom"] == "USER-DEFINED"
    assert all(c == c.lower() for c in cols)
    # read back as QGIS does (ST_AsBinary), equal to the ledger's state
    got, want = features(gis_place), snapshot(cli, "2026-08-01")
    assert sorted(got) == sorted(want)
    for key, (props, shape) in want.items():
        attrs, held = got[key]
        assert attrs["zone"] == props["Zone"] and attrs["units"] == props["units"]
        assert attrs["acres"] == props["acres"] and attrs["vacant"] is props["vacant"]
        assert canonical(held) == canonical(shape), key


def test_a_new_member_becomes_a_column_and_a_value_that_no_longer_fits_widens_it(
    cli: Cli, tmp_path: Path, gis_place: Place
) -> None:
    cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", day1())
    declare_and_rebuild(cli, gis_place)
    day2 = day1()
    day2["L1"] = ({**day2["L1"][0], "units": 2.5, "Owner": "ACME"}, day2["L1"][1])
    day2["L2"] = ({**day2["L2"][0], "vacant": "unknown"}, square(20, 20))
    ingest(cli, tmp_path, "2026-08-02", day2)
    live = cli.json("sync", "d", "--live", "--once")
    # (GDAL gives every feature of day 2 the new member, null: all 8 changed)
    assert live["outcomes"]["accepted"] == 8 and live["outcomes"]["unresolved"] == 0, live
    cols = columns(gis_place)
    assert cols["owner"] == "text" and cols["units"] == "double precision"
    assert cols["vacant"] == "text"
    got = features(gis_place)
    assert got["L1"][0]["owner"] == "ACME" and got["L1"][0]["units"] == 2.5
    assert got["L3"][0]["units"] == 3 and "owner" not in got["L3"][0]
    assert got["L2"][0]["vacant"] == "unknown" and got["L4"][0]["vacant"] == "true"
    assert canonical(got["L2"][1]) == canonical(shapely.geometry.shape(square(20, 20)))


def test_srid_reprojects_into_the_column_it_names(
    cli: Cli, tmp_path: Path, gis_place: Place
) -> None:
    cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", day1())
    declare_and_rebuild(cli, gis_place, "--srid", "3857")
    table = gis_place[2]
    meta = rows(gis_place, "SELECT srid FROM geometry_columns WHERE f_table_name = :t", t=table)
    assert [r[0] for r in meta] == [3857]
    back = rows(
        gis_place,
        f'SELECT parcel_id, ST_AsBinary(ST_Transform(geom, 4326)) FROM "{table}" WHERE NOT deleted',
    )
    want = snapshot(cli, "2026-08-01")
    assert len(back) == len(want)
    for key, wkb in back:
        shape = shapely.from_wkb(bytes(wkb))
        assert shape.equals_exact(want[key][1], tolerance=1e-7), key
    # the table records its SRID: declaring it again with another one is refused
    again = cli(
        "destination", "add", "e", "--source", "lots", "--postgis", gis_place[1],
        "--table", table, "--srid", "4326", expect=2,
    )  # fmt: skip
    assert "exists with SRID 3857, not 4326" in again.stderr


def test_a_source_without_geometry_is_refused_with_one_line(
    cli: Cli, tmp_path: Path, gis_place: Place
) -> None:
    cli("source", "add", "plain", "--key", "id")
    data = tmp_path / "plain.csv"
    data.write_text("id,name\n1,a\n")
    cli("ingest", "plain", str(data), "--published-at", "2026-08-01")
    got = cli(
        "destination", "add", "d", "--source", "plain", "--postgis", gis_place[1],
        "--table", gis_place[2], expect=2,
    )  # fmt: skip
    assert "source plain has no geometry" in got.stderr
    assert "--postgres URL" in got.stderr


def test_a_database_without_postgis_is_named(cli: Cli, tmp_path: Path) -> None:
    base = os.environ[PG_ENV]
    name = f"fl_nogis_{uuid.uuid4().hex[:8]}"
    admin = _engine(base).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        url = base.rsplit("/", 1)[0] + "/" + name
        cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
        ingest(cli, tmp_path, "2026-08-01", day1())
        got = cli(
            "destination", "add", "d", "--source", "lots", "--postgis", url,
            "--table", "lots", expect=2,
        )  # fmt: skip
        assert "the database has no PostGIS extension" in got.stderr
        assert "CREATE EXTENSION postgis" in got.stderr
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # the recipe's place
def test_the_layer_as_of_a_date_from_the_ledger_by_the_documented_sql(
    cli: Cli, tmp_path: Path, store_url: str
) -> None:
    cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
    first = day1()
    ingest(cli, tmp_path, "2026-08-01", first)
    second = {k: v for k, v in first.items() if k != "L3"}
    second["L1"] = ({**first["L1"][0], "Zone": "C9"}, square(30, 30))
    ingest(cli, tmp_path, "2026-08-05", second)
    engine = _engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS postgis"))
            schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        # the tests' stores each have their own schema; PostGIS's types are in public
        path = f'SET search_path TO "{schema}", public'
        with engine.begin() as conn:
            conn.execute(text(path))
            conn.connection.cursor().execute(ASOF_SQL.read_text())
        for valid, state in (("2026-08-03", first), ("2026-08-06", second)):
            with engine.connect() as conn:
                conn.execute(text(path))
                got = conn.execute(
                    text(
                        "SELECT attributes, ST_AsBinary(geom), ST_SRID(geom) "
                        "FROM feedledger_layer_asof('lots', CAST(:v AS timestamptz))"
                    ),
                    {"v": valid},
                ).all()
            want = snapshot(cli, valid)
            assert sorted(want) == sorted(state)
            by_key = {r[0]["parcel_id"]: r for r in got}
            assert sorted(by_key) == sorted(want), valid
            for key, (props, shape) in want.items():
                attrs, wkb, srid = by_key[key]
                assert attrs == props and srid == 4326
                assert canonical(shapely.from_wkb(bytes(wkb))) == canonical(shape), key
        # not observed: before the first payload, and inside a gap (not on a day a payload
        # was observed in it, in the source's timezone), refused as the layer API refuses;
        # as known before the gap was recorded, or without the check: the state before it
        known = datetime.now(UTC).isoformat()
        cli("gap", "add", "lots", "--from", "2026-08-06", "--to", "2026-08-08",
            "--reason", "portal down")  # fmt: skip
        third = {k: v for k, v in second.items() if k != "L1"}
        ingest(cli, tmp_path, "2026-08-07", third)  # inside the gap: 00:00 UTC on the 7th
        asof = "SELECT count(*) FROM feedledger_layer_asof('lots', CAST(:v AS timestamptz){})"
        denver = ", tz => 'America/Denver'"
        for valid, extra, words in (
            ("2026-07-30", "", "before its first observation"),
            ("2026-08-06T06:00:00+00:00", "", "inside a gap"),
            ("2026-08-06T20:00:00+00:00", "", "inside a gap"),
            ("2026-08-08T12:00:00+00:00", "", "inside a gap"),
            ("2026-08-08T12:00:00+00:00", denver, "inside a gap"),
        ):
            with engine.connect() as conn:
                conn.execute(text(path))
                with pytest.raises(DBAPIError, match=words):
                    conn.execute(text(asof.format(extra)), {"v": valid})
        with engine.connect() as conn:
            conn.execute(text(path))
            count = conn.execute
            # the 7th had a payload: observed, no longer in the gap
            got = count(text(asof.format("")), {"v": "2026-08-07T12:00:00+00:00"})
            assert got.scalar() == len(third)
            # in Denver that payload fell on the 6th (18:00): the 6th is observed there
            got = count(text(asof.format(denver)), {"v": "2026-08-06T20:00:00+00:00"})
            assert got.scalar() == len(second)
            # as known before the gap was recorded: answered
            before = ", 4326, CAST(:k AS timestamptz)"
            got = count(text(asof.format(before)), {"v": "2026-08-06T06:00:00+00:00", "k": known})
            assert got.scalar() == len(second)
            rows = "SELECT count(*) FROM feedledger_layer_rows('lots', CAST(:v AS timestamptz))"
            got = count(text(rows), {"v": "2026-08-08T12:00:00+00:00"})
            assert got.scalar() == len(third)
    finally:
        engine.dispose()


def test_an_unresolved_write_shows_the_held_columns_as_evidence(gis_place: Place) -> None:
    from feedledger.model.destination import Destination
    from feedledger.sync.kinds import open_target
    from feedledger.sync.transform import Doc, content_hash

    _kind, url, table = gis_place
    target = open_target(Destination("d", "lots", "postgis", url, table), geo=True, key=("id",))
    try:
        target.ensure()  # no ledger: a generic geometry column, columns from the writes
        wkb = shapely.to_wkb(shapely.box(0, 0, 1, 1), flavor="iso")

        def doc(body: dict[str, Any], revision: int = 5) -> Doc:
            text_ = json.dumps(body, sort_keys=True)
            return Doc('["A1"]', revision, "M-1", 1, content_hash(text_), False, text_, wkb)

        assert [v.verdict for v in target.write([doc({"id": "A1", "zone": "R1"})])] == ["accepted"]
        again = target.write([doc({"id": "A1", "zone": "R2"})])
        assert again[0].verdict == "unresolved"
        held = again[0].evidence["held"]  # type: ignore[index]
        assert held["doc"]["zone"] == "R1" and held["doc"]["id"] == "A1"
        assert [v.verdict for v in target.write([doc({"id": "A1", "zone": "R0"}, 4)])] == [
            "superseded"
        ]
    finally:
        target.close()
    got = rows(gis_place, f'SELECT id, zone, ST_AsText(geom) FROM "{table}"')
    assert [tuple(r) for r in got] == [("A1", "R1", "POLYGON((1 0,1 1,0 1,0 0,1 0))")]


def test_a_table_declared_before_the_first_payload_is_typed_when_it_comes(
    cli: Cli, tmp_path: Path, gis_place: Place
) -> None:
    cli("source", "add", "lots", "--key", "parcel_id", "--format", "geojson")
    _kind, url, table = gis_place
    cli("destination", "add", "d", "--source", "lots", "--postgis", url, "--table", table)
    meta = "SELECT type, srid FROM geometry_columns WHERE f_table_name = :t"
    assert [tuple(r) for r in rows(gis_place, meta, t=table)] == [("GEOMETRY", 0)]
    ingest(cli, tmp_path, "2026-08-01", day1())
    live = cli.json("sync", "d", "--live", "--once")
    assert live["outcomes"]["accepted"] == 8, live
    assert [tuple(r) for r in rows(gis_place, meta, t=table)] == [("POLYGON", 4326)]
    assert columns(gis_place)["units"] == "bigint"  # a column added by the first batch
    got, want = features(gis_place), snapshot(cli, "2026-08-01")
    assert {k: canonical(v[1]) for k, v in got.items()} == {
        k: canonical(v[1]) for k, v in want.items()
    }
