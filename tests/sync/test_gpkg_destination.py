"""The GeoPackage destination as QGIS sees it (read with GDAL through pyogrio, and the
GeoPackage's own tables with sqlite3): the layer typed from the source (geometry type,
SRS), the R-tree index answering a bounding-box read, the extent and last change in
gpkg_contents kept right, deleted parcels absent from the layer (their tombstones in
the side table), a reader with the file open seeing each committed batch; a rebuild
written to a new file and swapped in, keeping what the live route wrote meanwhile, and
a swap announced by a killed rebuild finished by the next writer; declarations refused
in one line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pyogrio
import pytest
import shapely

from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli, write_csv
from sync.destination_kinds import canonical, features, parcels, square, write_day

Place = tuple[str, str, str]


def ingest(cli: Cli, tmp_path: Path, day: str, state: dict[str, tuple[str, Any]]) -> None:
    cli("ingest", "zoning", str(write_day(tmp_path, day, state)), "--published-at", day)


def setup(cli: Cli, tmp_path: Path, n: int = 25) -> tuple[Place, dict[str, tuple[str, Any]]]:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    day1 = parcels(n)
    ingest(cli, tmp_path, "2026-08-01", day1)
    path = str(tmp_path / "out" / "zoning.gpkg")
    cli("destination", "add", "d", "--source", "zoning", "--gpkg", path, "--layer", "parcels")
    return ("gpkg", path, "parcels"), day1


def contents(path: str) -> tuple[Any, ...]:
    with sqlite3.connect(path) as conn:
        return tuple(
            conn.execute(
                "SELECT data_type, srs_id, min_x, min_y, max_x, max_y, last_change "
                "FROM gpkg_contents WHERE table_name = 'parcels'"
            ).fetchone()
        )


def bounds(state: dict[str, tuple[str, Any]]) -> tuple[float, ...]:
    shapes = [shapely.geometry.shape(g) for _z, g in state.values()]
    return tuple(float(b) for b in shapely.total_bounds(shapes))


def test_the_layer_is_typed_indexed_and_its_contents_row_kept_right(
    cli: Cli, tmp_path: Path
) -> None:
    place, day1 = setup(cli, tmp_path)
    path = place[1]
    cli("manifest", "create", "all", "--source", "zoning")
    assert cli.json("sync", "d", "--manifest", "all", "--batch", "10")["status"] == "finished"
    info = pyogrio.read_info(path, layer="parcels")
    # polygons and a MultiPolygon: MULTIPOLYGON (single parts written as one-part multis)
    assert info["geometry_type"] == "MultiPolygon" and info["features"] == 25
    assert info["crs"] == "EPSG:4326"
    kind, srs, *extent, first_change = contents(path)
    assert kind == "features" and srs == 4326
    assert tuple(extent) == bounds(day1)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x47504B47
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute('SELECT count(*) FROM "rtree_parcels_geom"').fetchone()[0] == 25
        ext = conn.execute(
            "SELECT extension_name FROM gpkg_extensions WHERE table_name = 'parcels'"
        ).fetchall()
        assert ("gpkg_rtree_index",) in ext
    # the layer list QGIS shows: the features layer only, no side table
    assert [str(n) for n, _t in pyogrio.list_layers(path)] == ["parcels"]
    # a bounding-box read (GDAL answers it with the R-tree)
    _meta, near = pyogrio.read_arrow(path, layer="parcels", bbox=(2.5, 0, 4.5, 10))
    assert sorted(near.column("parcel_id").to_pylist()) == ["P02", "P03", "P04"]
    # the live route: the parcel on the extent's right edge goes, one moves inside
    day2 = {k: v for k, v in day1.items() if k != "P24"}
    day2["P01"] = ("R1", square(1.5, 1.5))
    ingest(cli, tmp_path, "2026-08-02", day2)
    assert cli.json("sync", "d", "--live", "--once")["outcomes"]["accepted"] == 2
    _k, _s, *extent2, second_change = contents(path)
    want = bounds(day2)
    # recomputed from the R-tree (float32 boxes, rounded outwards): never smaller
    assert extent2[0] <= want[0] and extent2[1] <= want[1]
    assert extent2[2] >= want[2] and extent2[3] >= want[3]
    assert extent2 == pytest.approx(list(want), abs=1e-4)
    assert second_change > first_change
    got = features(place)
    assert "P24" not in got and sorted(got) == sorted(day2)
    assert canonical(got["P01"][1]) == canonical(shapely.geometry.shape(square(1.5, 1.5)))
    with sqlite3.connect(path) as conn:
        assert conn.execute('SELECT count(*) FROM "rtree_parcels_geom"').fetchone()[0] == 24
        tomb = conn.execute("SELECT fl_key FROM gpkgext_feedledger_parcels_tombstones").fetchall()
        assert tomb == [(json.dumps(["P24"]),)]
        counted = conn.execute(
            "SELECT feature_count FROM gpkg_ogr_contents WHERE table_name = 'parcels'"
        ).fetchone()[0]
        assert counted == 24


def test_a_reader_holding_the_file_open_sees_each_committed_batch(cli: Cli, tmp_path: Path) -> None:
    place, day1 = setup(cli, tmp_path, 6)
    cli("manifest", "create", "all", "--source", "zoning")
    cli.json("sync", "d", "--manifest", "all")
    reader = sqlite3.connect(place[1])  # as QGIS keeps its connection
    try:
        assert reader.execute("SELECT count(*) FROM parcels").fetchone()[0] == 6
        day2 = {**day1, "P09": ("R2", square(30, 30))}
        del day2["P00"]
        ingest(cli, tmp_path, "2026-08-02", day2)
        cli.json("sync", "d", "--live", "--once")
        keys = [json.loads(k)[0] for (k,) in reader.execute("SELECT fl_key FROM parcels")]
        assert sorted(keys) == sorted(day2)
    finally:
        reader.close()


def test_a_rebuild_swaps_in_a_new_file_keeping_what_the_live_route_wrote_meanwhile(
    cli: Cli, tmp_path: Path
) -> None:
    place, day1 = setup(cli, tmp_path, 12)
    path = Path(place[1])
    cli("manifest", "create", "all", "--source", "zoning")
    before = path.stat().st_ino
    killed = cli.proc("sync", "d", "--manifest", "all", "--batch", "5",
                      env={FAULT_ENV: "before_destination_finish:kill"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # every batch is in the new file; the old one, in place, is untouched
    [new] = list(path.parent.glob(".zoning.gpkg.rebuild-*.gpkg"))
    assert pyogrio.read_info(str(new), layer="parcels")["features"] == 12
    assert path.stat().st_ino == before and pyogrio.read_info(str(path))["features"] == 0
    # meanwhile the live route (another process) writes the old file in place
    day2 = {k: v for k, v in day1.items() if k != "P03"}
    day2["P01"] = ("R8", square(20, 20))
    ingest(cli, tmp_path, "2026-08-02", day2)
    live = cli.proc("sync", "d", "--live", "--once")
    assert live.returncode == 0, live.stderr
    # the rebuild resumes and finishes: the new file takes the old one's place, with
    # the live route's move and deletion carried over (newer revisions win)
    done = cli.json("sync", "d", "--manifest", "all", "--batch", "5")
    assert done["status"] == "finished"
    assert path.stat().st_ino != before and not new.exists()
    got = features(place)
    assert sorted(got) == sorted(day2)
    assert got["P01"][0]["zone"] == "R8"
    assert canonical(got["P01"][1]) == canonical(shapely.geometry.shape(square(20, 20)))
    with sqlite3.connect(path) as conn:
        tomb = conn.execute("SELECT fl_key FROM gpkgext_feedledger_parcels_tombstones").fetchall()
    assert tomb == [(json.dumps(["P03"]),)]
    cli("manifest", "create", "now", "--source", "zoning")
    cli.json("sync", "d", "--manifest", "now")
    assert cli.json("reconcile", "d", "--manifest", "now")["complete"] is True
    assert not list(path.parent.glob(".zoning.gpkg.rebuild-*"))


def test_a_swap_a_killed_rebuild_announced_is_finished_by_the_next_writer(
    cli: Cli, tmp_path: Path
) -> None:
    place, day1 = setup(cli, tmp_path, 8)
    path = Path(place[1])
    cli("manifest", "create", "all", "--source", "zoning")
    killed = cli.proc("sync", "d", "--manifest", "all",
                      env={FAULT_ENV: "gpkg_swap_marked:kill"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(path.parent.glob(".zoning.gpkg.rebuild-*.gpkg"))  # announced, not swapped
    day2 = {**day1, "P02": ("R4", square(12, 12))}
    ingest(cli, tmp_path, "2026-08-02", day2)
    assert cli.json("sync", "d", "--live", "--once")["outcomes"]["accepted"] == 1
    assert not list(path.parent.glob(".zoning.gpkg.rebuild-*"))  # the live writer swapped
    got = features(place)
    assert sorted(got) == sorted(day2) and got["P02"][0]["zone"] == "R4"
    done = cli.json("sync", "d", "--manifest", "all")  # the rebuild resumes: nothing lost
    assert done["status"] == "finished"
    got = features(place)
    assert sorted(got) == sorted(day2) and got["P02"][0]["zone"] == "R4"


def test_a_source_without_geometry_gets_an_attribute_table(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "plain", "--key", "id")
    rows = [["a", "x", "1"], ["b", "y", "2"]]
    cli(
        "ingest",
        "plain",
        str(write_csv(tmp_path / "plain_2026-08-01.csv", ["id", "name", "n"], rows)),
    )
    path = str(tmp_path / "plain.gpkg")
    cli("destination", "add", "d", "--source", "plain", "--gpkg", path, "--layer", "things")
    cli("manifest", "create", "all", "--source", "plain")
    assert cli.json("sync", "d", "--manifest", "all")["outcomes"]["accepted"] == 2
    meta, table = pyogrio.read_arrow(path, layer="things")
    assert meta["geometry_type"] is None
    got = {r["id"]: r["name"] for r in table.to_pylist()}
    assert got == {"a": "x", "b": "y"}
    with sqlite3.connect(path) as conn:
        kind = conn.execute("SELECT data_type FROM gpkg_contents").fetchone()[0]
    assert kind == "attributes"


def test_bad_geopackage_declarations_are_refused_in_one_line(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", parcels(3))
    gpkg = str(tmp_path / "z.gpkg")

    def refused(*args: str) -> str:
        got = cli("destination", "add", "d", "--source", "zoning", *args, expect=2)
        assert len(got.stderr.strip().splitlines()) <= 2, got.stderr
        return str(got.stderr)

    assert "--layer" in refused("--gpkg", gpkg, "--table", "t")
    assert "--layer" in refused("--gpkg", gpkg)
    assert "exactly one" in refused("--gpkg", gpkg, "--sqlite", str(tmp_path / "x.db"),
                                    "--layer", "l")  # fmt: skip
    text = tmp_path / "notes.gpkg"
    text.write_text("not a database at all, just some words" * 40)
    assert "not a GeoPackage" in refused("--gpkg", str(text), "--layer", "l")
    # a layer someone else made is not overwritten
    import pyarrow as pa

    pyogrio.write_arrow(pa.table({"a": pa.array([1])}), gpkg, layer="theirs", driver="GPKG")
    assert "not made by feedledger" in refused("--gpkg", gpkg, "--layer", "theirs")
    assert pyogrio.read_info(gpkg, layer="theirs")["features"] == 1
    # one destination per file: a rebuild replaces the whole file
    cli("destination", "add", "d", "--source", "zoning", "--gpkg", gpkg, "--layer", "mine")
    got = cli("destination", "add", "e", "--source", "zoning", "--gpkg", gpkg, "--layer", "other",
              expect=2)  # fmt: skip
    assert "already the file of destination d" in got.stderr
    assert os.path.exists(gpkg)


def test_the_live_route_of_a_killed_rebuild_wrote_the_file_in_place(
    cli: Cli, tmp_path: Path
) -> None:
    place, day1 = setup(cli, tmp_path, 12)
    cli("manifest", "create", "all", "--source", "zoning")
    day2 = {**day1, "P05": ("R6", square(60, 60))}
    ingest(cli, tmp_path, "2026-08-02", day2)  # waits for the live route
    # the rebuild serves the live route before its first batch, then dies
    killed = cli.proc("sync", "d", "--manifest", "all", "--batch", "5",
                      env={FAULT_ENV: "after_checkpoint:1:kill"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert cli.json("sync", "d", "--live", "--once")["outcomes"]["accepted"] == 0  # done
    got = features(place)  # the file in place, not the abandoned rebuild's
    assert got["P05"][0]["zone"] == "R6"
