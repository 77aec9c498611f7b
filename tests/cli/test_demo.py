"""`feedledger demo` also serves a zoning layer from its own FeatureServer
(demo/featureserver.py), runs an `--connector arcgis` source over three
publication days and shows a parcel's geometry change; a ring merely rotated is not one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

import feedledger as fl
from feedledger.cli.main import app
from feedledger.demo import MOVED, ROTATED, ZONING, build_demo
from feedledger.demo.featureserver import serving
from feedledger.demo.zoning import EDITS, features, layer
from feedledger.formats.spatial.geometry import geometry_changed
from feedledger.sources.arcgis import fetch_layer

EDIT_MS = int(EDITS[0].timestamp() * 1000)


def _geojson(feature: Any) -> dict[str, Any]:
    return {"type": "Polygon", "coordinates": feature["rings"]}


def _ring(feature: Any) -> Any:
    return feature["rings"][0]


def _attributes(feature: Any) -> Any:
    return feature["attributes"]


def _by_parcel(day: int) -> dict[str, Any]:
    return {f["attributes"]["PARCEL_ID"]: f for f in features(day)}


def test_the_days_change_what_the_brief_says() -> None:
    day1, day2, day3 = _by_parcel(0), _by_parcel(1), _by_parcel(2)
    moved, rotated = _ring(day2[MOVED]), _ring(day2[ROTATED])
    assert len(set(map(tuple, moved)) - set(map(tuple, _ring(day1[MOVED])))) == 1
    assert rotated != _ring(day1[ROTATED]) and rotated[0] == rotated[-1]
    pairs = [(day1[MOVED], day2[MOVED]), (day1[ROTATED], day2[ROTATED])]
    before = [_geojson(a) for a, _b in pairs]
    after = [_geojson(b) for _a, b in pairs]
    assert geometry_changed(before, after) == [True, False]
    assert _attributes(day2[MOVED]) == _attributes(day1[MOVED])  # a geometry change only
    assert _attributes(day3[MOVED])["ZONE"] == "MU-2" and _ring(day3[MOVED]) == moved
    others = [p for p in day1 if p != MOVED]
    assert all(_attributes(day3[p]) == _attributes(day1[p]) for p in others)


def test_the_fake_featureserver_is_read_by_fetch_layer() -> None:
    with serving(layer(0)) as fake:
        url, log = fake.url, fake.server.log  # type: ignore[union-attr]
        got = fetch_layer(url, name=ZONING)
        assert got.published_ms == EDIT_MS and got.data is not None
        lines = [json.loads(line) for line in got.data.decode().splitlines()]
        assert [f["properties"]["PARCEL_ID"] for f in lines] == list(_by_parcel(0))
        assert lines[0]["geometry"]["type"] == "Polygon"
        assert got.metadata["count"] == 6 and got.metadata["wkid"] == 4326
        pages = [r.query for r in log if r.path.endswith("/query") and "resultOffset" in r.query]
        assert [q["resultOffset"] for q in pages] == ["0", "4"]  # maxRecordCount 4
        # nothing new: the layer's date is not after the watermark, no query at all
        asked = len(log)
        assert fetch_layer(url, name=ZONING, since_ms=EDIT_MS).nothing_new
        assert [r.path for r in log[asked:]] == [log[0].path]


def test_the_fake_featureserver_answers_esri_json_ids_and_errors() -> None:
    with serving(layer(0)) as fake:
        url = fake.url

        def ask(path: str = "/query", **params: str) -> Any:
            return httpx.get(url + path, params={"where": "1=1", **params}).json()

        meta = ask("", f="json")
        assert meta["editingInfo"]["dataLastEditDate"] == EDIT_MS
        assert meta["objectIdField"] == "OBJECTID" and meta["maxRecordCount"] == 4
        assert ask(returnCountOnly="true", f="json") == {"count": 6}
        assert ask(returnIdsOnly="true", f="json")["objectIds"] == [1, 2, 3, 4, 5, 6]
        esri = ask(outFields="*", resultOffset="0", resultRecordCount="10", f="json")
        assert len(esri["features"]) == 4 and esri["exceededTransferLimit"] is True
        assert "rings" in esri["features"][0]["geometry"]
        last = ask(outFields="*", resultOffset="4", f="json")
        assert len(last["features"]) == 2 and "exceededTransferLimit" not in last
        by_id = ask(objectIds="2,5", outFields="*", f="geojson")
        assert [f["id"] for f in by_id["features"]] == [2, 5]
        assert ask(outSR="2227", f="json")["error"]["code"] == 400
        assert ask(f="json", where="ZONE='R-1'")["error"]["code"] == 400
        assert ask("/nope", f="json")["error"]["code"] == 400


def _changed(led: Any, run_id: str, key: str) -> bool | None:
    for change in led.changes(run_id):
        if change.key in (key, [key]):
            return change.geometry_changed
    raise AssertionError(f"run {run_id} changed nothing for {key}")


def test_demo_zoning_history(store_url: str, tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", store=store_url)
    z = demo.zoning
    assert z is not None
    statuses = [r.to_json()["status"] for r in z.results]
    assert statuses == ["applied", "applied", "applied", "nothing_to_do"]
    assert z.feature_queries[-1] == 0  # nothing new: no feature downloaded
    with fl.open(demo.workspace) as led:
        src = led.source(ZONING)
        versions = src.history(MOVED)
        assert [v.valid_from for v in versions] == EDITS
        assert [(v.attributes or {}).get("ZONE") for v in versions] == ["R-1", "R-1", "MU-2"]
        geometries = [v.geometry for v in versions]
        assert all(g is not None and g["type"] == "Polygon" for g in geometries)
        assert geometries[0] != geometries[1] == geometries[2]
        assert [_changed(led, v.run_id, MOVED) for v in versions] == [True, True, False]
        assert len(src.history(ROTATED)) == 1  # a rotated ring is not a version


def test_demo_cli_shows_the_zoning_layer(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"history of zoning parcel {MOVED}" in text and "nothing new" in text
    assert f"Parcel {ROTATED} was republished" in text and "(1 version in" in text
    assert "-> (-105.08858, 40.59080)" in text  # the moved north-east corner
    config = str(tmp_path / "demo" / "feedledger.toml")
    hist = runner.invoke(app, ["--config", config, "history", ZONING, MOVED, "--json"])
    assert [v["geometry"]["type"] for v in json.loads(hist.stdout)] == ["Polygon"] * 3
    # the demo's server is gone: a later run is one clear line, not a traceback
    again = runner.invoke(app, ["--config", config, "run", ZONING])
    assert again.exit_code != 0, again.output
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and ZONING in lines[0] and "cannot reach" in lines[0], lines


def test_demo_without_zoning(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo", zoning=False)
    assert demo.zoning is None and demo.results
