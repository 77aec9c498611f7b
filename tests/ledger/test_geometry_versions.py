"""GIS versions in the ledger -- geometry stored with each version, reported
by history/asof (`geometry`, GeoJSON), judged by change records (`geometry_changed`),
CRS changes refused, invalid geometries counted. Both backends (`workspace` fixture).

The ledger half is tested with Observations built here (`observations`), so that it
does not depend on a reader; the end-to-end half goes through the CLI with files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import func, select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.formats import Observations
from feedledger.formats.spatial.geometry import geometry_hash
from feedledger.ledger import bulk
from feedledger.ledger.runs import leases
from feedledger.ledger.schema import outcomes, payloads, versions
from feedledger.ledger.store import Store
from feedledger.model.errors import BadPayloadError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.pipeline.intake.apply import Applied, apply_observations
from helpers import Cli, MakeSource

Feature = tuple[dict[str, Any], dict[str, Any] | None]  # (properties, geometry)


def square(x: float, y: float, *, start: int = 0, reverse: bool = False) -> dict[str, Any]:
    """A closed unit square ring at (x, y), starting at vertex `start`, optionally the
    other way round: the same polygon whatever `start` and `reverse`."""
    corners = [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1]]
    if reverse:
        corners = corners[::-1]
    ring = corners[start:] + corners[:start]
    return {"type": "Polygon", "coordinates": [[*ring, ring[0]]]}


def observations(
    features: Mapping[str, Feature],
    *,
    crs: str | None = "EPSG:4326",
    invalid: int = 0,
) -> Observations:
    """Observations as a GIS reader builds them: `hash` folds in the canonical
    geometry hash, `geometry` holds the geometry as stated (GeoJSON text)."""
    keys = list(features)
    attrs = [json.dumps(features[k][0], sort_keys=True, separators=(",", ":")) for k in keys]
    shapes = [features[k][1] for k in keys]
    ghash = geometry_hash(shapes)

    def content(a: str, g: int | None) -> int:
        digest = hashlib.blake2b(f"{a}|{g}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little", signed=True)

    frame = pl.DataFrame(
        {
            "idx": pl.Series(range(len(keys)), dtype=pl.UInt32),
            "key": [json.dumps([k]) for k in keys],
            "hash": pl.Series([content(a, g) for a, g in zip(attrs, ghash, strict=True)]),
            "revision": pl.Series([None] * len(keys), dtype=pl.String),
            "deleted": pl.Series([False] * len(keys)),
        }
    )
    geometry = pl.DataFrame(
        {
            "geometry": pl.Series([json.dumps(s) if s else None for s in shapes], dtype=pl.String),
            "geometry_hash": pl.Series(ghash, dtype=pl.Int64),
        }
    )
    return Observations(
        frame=frame,
        raw=pl.DataFrame({"attributes": pl.Series(attrs, dtype=pl.String)}),
        attr_columns=None,
        fields=["parcel_id", "zoning"],
        geometry=geometry,
        crs=crs,
        invalid_geometries=invalid,
    )


def apply(ws: Workspace, src: SourceConfig, obs: Observations, day: str) -> Applied:
    """Archive a stand-in payload for `day` and apply `obs` as a live run of it."""
    with Context(ws) as ctx:
        at = to_us(parse_instant(day, src.timezone, what="day"))
        ref, _ = ctx.archive.put(
            src.name, f"{src.name} {day}".encode(), published_at=at, fetched_at=at
        )
        ctx.store.register_payload(ref)
        with leases.leased_run(ctx.store, src.name, "live") as run:
            return apply_observations(
                ctx, src, ref, obs, run_id=run.run_id, holder=run.holder, hold_bursts=False
            )


def table_rows(ws: Workspace, stmt: Any) -> list[Any]:
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(stmt))
    finally:
        store.close()


DAY1 = {
    "P1": ({"parcel_id": "P1", "zoning": "R1"}, square(0, 0)),
    "P2": ({"parcel_id": "P2", "zoning": "R1"}, square(2, 0)),
    "P3": ({"parcel_id": "P3", "zoning": "C2"}, square(4, 0)),
    "P4": ({"parcel_id": "P4", "zoning": "A1"}, square(6, 0)),
}
MOVED = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1.5, 1], [0, 1], [0, 0]]]}
DAY2 = {
    "P1": ({"parcel_id": "P1", "zoning": "R1"}, MOVED),  # a vertex moved
    "P2": ({"parcel_id": "P2", "zoning": "R1"}, square(2, 0, start=2, reverse=True)),  # rotated
    "P3": ({"parcel_id": "P3", "zoning": "C3"}, square(4, 0)),  # attribute only
    "P5": ({"parcel_id": "P5", "zoning": "R2"}, square(8, 0)),  # added; P4 deleted
}


@pytest.fixture
def geo(make_source: MakeSource) -> SourceConfig:
    return make_source("zoning", "parcel_id", format="geojson")


def test_versions_carry_geometry_and_changes_say_if_it_moved(
    workspace: Workspace, cli: Cli, geo: SourceConfig
) -> None:
    first = apply(workspace, geo, observations(DAY1), "2026-08-01")
    assert first.counts["added"] == 4 and first.invalid_geometries == 0
    second = apply(workspace, geo, observations(DAY2), "2026-08-02")
    assert {k: second.counts[k] for k in ("added", "changed", "deleted", "unchanged")} == {
        "added": 1,
        "changed": 2,
        "deleted": 1,
        "unchanged": 1,  # P2: its ring only starts elsewhere and runs the other way
    }

    history = cli.json("history", "zoning", "P1")
    assert [v["geometry"] for v in history] == [square(0, 0), MOVED]
    assert [v["attributes"]["zoning"] for v in history] == ["R1", "R1"]
    rotated = cli.json("history", "zoning", "P2")
    assert len(rotated) == 1 and rotated[0]["geometry"] == square(2, 0)  # as first stated
    gone = cli.json("history", "zoning", "P4")
    assert [v["deleted"] for v in gone] == [False, True]
    assert gone[1]["geometry"] is None and gone[1]["attributes"] is None
    asof = cli.json("asof", "zoning", "P1", "--valid", "2026-08-01")
    assert asof["version"]["geometry"] == square(0, 0)

    changes = {c["key"][0]: c for c in cli.json("changes", "--run", second.run_id)}
    assert {k: (c["change"], c["geometry_changed"]) for k, c in changes.items()} == {
        "P1": ("changed", True),
        "P3": ("changed", False),
        "P4": ("deleted", True),
        "P5": ("added", True),
    }
    assert all("geometry_changed" in c for c in cli.json("changes", "--run", first.run_id))

    shown = cli("history", "zoning", "P1").stdout
    assert "Polygon, 5 vertices" in shown and "1.5" not in shown.split("R1")[-1]

    stated = table_rows(workspace, select(payloads.c.crs, payloads.c.fields))
    assert [(r.crs, json.loads(r.fields)) for r in stated] == [
        ("EPSG:4326", ["parcel_id", "zoning"])
    ] * 2


def test_python_api_versions_and_changes(workspace: Workspace, geo: SourceConfig) -> None:
    import feedledger

    apply(workspace, geo, observations(DAY1), "2026-08-01")
    second = apply(workspace, geo, observations(DAY2), "2026-08-02")
    with feedledger.open(workspace.config_path) as led:
        src = led.source("zoning")
        versions_ = src.history("P1")
        assert [v.geometry for v in versions_] == [square(0, 0), MOVED]
        gone = src.asof("P4", valid=date(2026, 8, 2)).version
        assert gone is not None and gone.deleted and gone.geometry is None
        found = {c.key[0]: c.geometry_changed for c in led.changes(second.run_id)}
    assert found == {"P1": True, "P3": False, "P4": True, "P5": True}


def test_other_sources_keep_their_json_shapes(
    workspace: Workspace, cli: Cli, make_source: MakeSource, tmp_path: Path
) -> None:
    make_source("plain", "id")
    day1 = tmp_path / "plain_2026-08-01.csv"
    day1.write_text("id,v\n1,a\n")
    run = cli.json("ingest", "plain", str(day1), "--published-at", "2026-08-01")
    assert "invalid_geometries" not in run
    (version,) = cli.json("history", "plain", "1")
    assert "geometry" not in version
    (change,) = cli.json("changes", "--run", run["run_id"])
    assert "geometry_changed" not in change
    assert [r.crs for r in table_rows(workspace, select(payloads.c.crs))] == [None]
    assert [r.geometry for r in table_rows(workspace, select(versions.c.geometry))] == [None]


@pytest.mark.parametrize(
    ("before", "after", "named"),
    [
        ("EPSG:4326", "EPSG:2232", ("EPSG:2232", "EPSG:4326")),
        ("EPSG:4326", None, ("(none stated)", "EPSG:4326")),
        (None, "EPSG:4326", ("EPSG:4326", "(none stated)")),
    ],
)
def test_a_crs_change_is_refused_and_nothing_changes(
    workspace: Workspace,
    geo: SourceConfig,
    before: str | None,
    after: str | None,
    named: tuple[str, str],
) -> None:
    apply(workspace, geo, observations(DAY1, crs=before), "2026-08-01")
    count = select(func.count()).select_from(versions)
    kept = table_rows(workspace, count)
    with pytest.raises(BadPayloadError) as refused:
        apply(workspace, geo, observations(DAY2, crs=after), "2026-08-02")
    message = str(refused.value)
    assert f"layer CRS {named[0]} differs from this source's {named[1]}" in message
    assert "reprojection is never silent" in message and "'zoning'" in message
    assert table_rows(workspace, count) == kept
    with Context(workspace) as ctx:
        wm = ctx.store.watermark("zoning")
        assert wm is not None and wm.published_at == to_us(
            parse_instant("2026-08-01", geo.timezone, what="day")
        )
        assert len(ctx.archive.get(ctx.store.list_payloads("zoning")[-1].sha256)) > 0
    # the same CRS as before applies
    apply(workspace, geo, observations(DAY2, crs=before), "2026-08-03")


def test_held_outcomes_keep_their_geometry(workspace: Workspace, make_source: MakeSource) -> None:
    """A record the revision guard does not apply (superseded) keeps its geometry in
    `outcomes`, beside its attributes."""
    src = make_source("zoned", "parcel_id", format="geojson", revision="rev")
    one = {"P1": ({"parcel_id": "P1", "rev": 2}, square(0, 0))}
    obs = observations(one)
    apply(workspace, src, obs.__class__(**{**obs.__dict__, "frame": _rev(obs, "2")}), "2026-08-01")
    old = observations({"P1": ({"parcel_id": "P1", "rev": 1}, square(5, 5))})
    applied = apply(
        workspace, src, old.__class__(**{**old.__dict__, "frame": _rev(old, "1")}), "2026-08-02"
    )
    assert applied.counts["superseded"] == 1
    (row,) = table_rows(workspace, select(outcomes.c.outcome, outcomes.c.geometry))
    assert row.outcome == "superseded" and json.loads(row.geometry) == square(5, 5)


def _rev(obs: Observations, value: str) -> pl.DataFrame:
    return obs.frame.with_columns(pl.lit(value, dtype=pl.String).alias("revision"))


def test_large_payloads_write_geometry_through_every_bulk_path(
    workspace: Workspace, cli: Cli, geo: SourceConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunked encoding (a helper thread one chunk ahead) and, on SQLite, staging
    through scratch files: the geometry columns travel with the attribute texts."""
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 10)
    monkeypatch.setattr(bulk, "VERSION_CHUNK_ROWS", 7)
    many: dict[str, Feature] = {
        f"Q{i:02d}": ({"parcel_id": f"Q{i:02d}", "zoning": "R1"}, square(i, i)) for i in range(30)
    }
    many["Q05"] = ({"parcel_id": "Q05", "zoning": "R1"}, None)  # a feature without geometry
    apply(workspace, geo, observations(many), "2026-08-01")
    rows = table_rows(
        workspace,
        select(versions.c.key, versions.c.geometry, versions.c.geometry_hash).order_by(
            versions.c.key
        ),
    )
    assert len(rows) == 30
    for row in rows:
        key = json.loads(row.key)[0]
        shape = many[key][1]
        assert (json.loads(row.geometry) if row.geometry else None) == shape
        assert (row.geometry_hash is None) == (shape is None)
    (version,) = cli.json("history", "zoning", "Q05")
    assert version["geometry"] is None


def test_geometry_changed_reaches_subscribers(
    workspace: Workspace, cli: Cli, geo: SourceConfig, tmp_path: Path
) -> None:
    lines = tmp_path / "changes.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))
    first = apply(workspace, geo, observations(DAY1), "2026-08-01")
    second = apply(workspace, geo, observations(DAY2), "2026-08-02")
    cli("notify", "dispatch", "--once")
    sent = [json.loads(line) for line in lines.read_text().splitlines()]
    bodies = [s.get("body", s) for s in sent]
    by_run = {
        run: {b["key"][0]: b["geometry_changed"] for b in bodies if b["run_id"] == run}
        for run in (first.run_id, second.run_id)
    }
    assert by_run == {
        first.run_id: {"P1": True, "P2": True, "P3": True, "P4": True},
        second.run_id: {"P1": True, "P3": False, "P4": True, "P5": True},
    }


# -- end to end through the CLI, from files ----------------------------------------------


def collection(features: Mapping[str, Feature]) -> bytes:
    """A GeoJSON FeatureCollection of the features (properties, geometry)."""
    feats = [{"type": "Feature", "properties": p, "geometry": g} for p, g in features.values()]
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


def ingest(cli: Cli, tmp_path: Path, source: str, name: str, data: bytes, day: str) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return cli("ingest", source, str(path), "--published-at", day, "--json")


def version_count(ws: Workspace) -> int:
    (row,) = table_rows(ws, select(func.count()).select_from(versions))
    return int(row[0])


def test_geojson_end_to_end(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    first = json.loads(
        ingest(cli, tmp_path, "zoning", "d1.geojson", collection(DAY1), "2026-08-01").stdout
    )
    assert first["added"] == 4 and first["invalid_geometries"] == 0
    result = ingest(cli, tmp_path, "zoning", "d2.geojson", collection(DAY2), "2026-08-02")
    second = json.loads(result.stdout)
    assert "invalid geometry" not in result.stderr
    assert (second["changed"], second["added"], second["deleted"], second["unchanged"]) == (
        2, 1, 1, 1,
    )  # fmt: skip
    changes = {c["key"][0]: c for c in cli.json("changes", "--run", second["run_id"])}
    assert {k: (c["change"], c["geometry_changed"]) for k, c in changes.items()} == {
        "P1": ("changed", True),
        "P3": ("changed", False),
        "P4": ("deleted", True),
        "P5": ("added", True),
    }
    shown = cli("changes", "--run", second["run_id"]).stdout
    assert "geometry" in shown and "same" in shown  # P3: only an attribute changed
    moved = cli.json("history", "zoning", "P1")
    assert [v["geometry"] for v in moved] == [square(0, 0), MOVED]
    (rotated,) = cli.json("history", "zoning", "P2")  # the rotated ring is no change
    assert rotated["geometry"] == square(2, 0) and rotated["valid_to"] is None
    assert cli.json("asof", "zoning", "P3", "--valid", "2026-08-02")["version"]["geometry"] == (
        square(4, 0)
    )
    (described,) = [s for s in cli.json("source", "list") if s["name"] == "zoning"]
    assert described["format"] == "geojson" and described["geometry_grid"] == 1e-9


def gpkg(tmp_path: Path, name: str, crs: str) -> bytes:
    import pyarrow as pa
    import pyogrio
    import shapely

    shapes = shapely.from_geojson([json.dumps(square(i, 0)) for i in range(3)])
    table = pa.table(
        {
            "parcel_id": ["A", "B", "C"],
            "zoning": ["R1", "R1", "C2"],
            "geometry": pa.array(shapely.to_wkb(shapes), pa.binary()),
        }
    )
    path = tmp_path / name
    pyogrio.write_arrow(
        table, path, driver="GPKG", layer="parcels", geometry_name="geometry",
        geometry_type="Polygon", crs=crs,
    )  # fmt: skip
    return path.read_bytes()


def test_a_crs_change_through_the_cli_is_refused_and_the_bytes_kept(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    cli("source", "add", "parcels", "--key", "parcel_id", "--format", "gpkg")
    ingest(cli, tmp_path, "parcels", "p1.gpkg", gpkg(tmp_path, "a.gpkg", "EPSG:4326"), "2026-08-01")
    before = version_count(workspace)
    data = gpkg(tmp_path, "b.gpkg", "EPSG:2232")
    path = tmp_path / "p2.gpkg"
    path.write_bytes(data)
    result = cli("ingest", "parcels", str(path), "--published-at", "2026-08-02", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert "layer CRS EPSG:2232 differs from this source's EPSG:4326" in line, line
    assert "reprojection is never silent" in line and "'parcels'" in line and "p2.gpkg" in line
    assert version_count(workspace) == before
    assert cli.json("watermark", "parcels")["published_at"].startswith("2026-08-01")
    sha = hashlib.sha256(data).hexdigest()
    assert any(p.read_bytes() == data for p in (cli.ws.archive_root / "objects").rglob(sha))
    assert any((cli.ws.archive_root / "rejected" / "parcels").glob("*.json"))
    # the publication slot stays free: the layer reprojected for that date applies
    fixed = gpkg(tmp_path, "c.gpkg", "EPSG:4326")
    again = json.loads(ingest(cli, tmp_path, "parcels", "p2b.gpkg", fixed, "2026-08-02").stdout)
    assert again["status"] == "applied" and again["changes"] == 0


BOWTIE = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}


def test_invalid_geometries_are_kept_counted_and_warned(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    bad = {
        **DAY1,
        "P1": ({"parcel_id": "P1", "zoning": "R1"}, BOWTIE),
        "P2": ({"parcel_id": "P2", "zoning": "R1"}, BOWTIE),
    }
    result = ingest(cli, tmp_path, "zoning", "d1.geojson", collection(bad), "2026-08-01")
    assert json.loads(result.stdout)["invalid_geometries"] == 2
    assert "zoning: 2 features have invalid geometry (kept as stated)" in result.stderr
    (kept,) = cli.json("history", "zoning", "P1")
    assert kept["geometry"] == {"type": "Polygon", "coordinates": BOWTIE["coordinates"]}


@pytest.mark.parametrize(
    ("features", "problem"),
    [
        ([({"parcel_id": "A"}, square(0, 0)), ({"parcel_id": "A"}, square(1, 0))], "duplicate"),
        ([({"parcel": "A"}, square(0, 0))], "parcel_id"),
    ],
    ids=["duplicate-keys", "missing-key-field"],
)
def test_bad_layers_are_refused_and_the_ledger_untouched(
    cli: Cli, workspace: Workspace, tmp_path: Path, features: list[Feature], problem: str
) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    data = collection({str(i): f for i, f in enumerate(features)})
    path = tmp_path / "bad.geojson"
    path.write_bytes(data)
    result = cli("ingest", "zoning", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert problem in line and "'zoning'" in line and "bad.geojson" in line, line
    assert version_count(workspace) == 0
    assert any((cli.ws.archive_root / "rejected" / "zoning").glob("*.json"))


def test_a_backfill_equals_the_live_runs_of_the_same_days(cli: Cli, tmp_path: Path) -> None:
    """Three days of a layer applied live, one a day, and the same three archived then
    backfilled into a second source: the same history, geometry included; a retraction
    and a replay of the live source come back to it."""
    day3 = {**DAY2, "P3": ({"parcel_id": "P3", "zoning": "C3"}, square(4, 0.5))}
    days = {"2026-08-01": DAY1, "2026-08-02": DAY2, "2026-08-03": day3}
    folder = tmp_path / "served"
    folder.mkdir()
    for day, features in days.items():
        (folder / f"zoning_{day}.geojson").write_bytes(collection(features))
    for name in ("live", "back"):
        cli("source", "add", name, "--key", "parcel_id", "--format", "geojson")
    for day in days:
        cli("ingest", "live", str(folder / f"zoning_{day}.geojson"), "--published-at", day)
        cli("archive", "add", "back", str(folder / f"zoning_{day}.geojson"), "--published-at", day)
    report = cli.json(
        "backfill", "back", "--from", "2026-08-01", "--to", "2026-08-03", "--no-fetch"
    )
    assert [s["invalid_geometries"] for s in report["steps"]] == [0, 0, 0]

    def line(source: str, key: str) -> list[tuple[Any, ...]]:
        return [
            (v["valid_from"], v["valid_to"], v["deleted"], v["attributes"], v["geometry"])
            for v in cli.json("history", source, key)
        ]

    keys = ("P1", "P2", "P3", "P4", "P5")
    for key in keys:
        assert line("back", key) == line("live", key), key
    # a retraction takes the geometry back with the attributes; a replay restores both
    expected = {key: line("live", key) for key in keys}
    last = cli.json("runs", "live")[-1]["run_id"]
    cli("retract", last)
    assert [v["geometry"] for v in cli.json("history", "live", "P3")] == [square(4, 0)] * 2
    cli("replay", "live", "--from", "2026-08-02")
    assert {key: line("live", key) for key in keys} == expected
    assert [v["geometry"] for v in cli.json("history", "back", "P3")] == [
        square(4, 0), square(4, 0), square(4, 0.5),
    ]  # fmt: skip
