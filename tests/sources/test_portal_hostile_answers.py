"""Hostile portal answers end in one line with a documented exit code and nothing
archived or applied: a redirect loop (ArcGIS metadata, an ArcGIS query page, a Socrata
view), an edit date no calendar holds (1e20 ms, NaN), a Retry-After beyond the fetch
deadline, a GeoJSON page stating a projected `crs`, and projected coordinates in a layer
read as geographic (also for a GeoJSON file ingested directly, whose stated `crs` is
honoured).

The servers are the fakes of tests/fakes/ on 127.0.0.1 (ArcGIS: Esri's REST API
reference; Socrata: dev.socrata.com, see their docstrings), with one answer changed per
test. Where the changed answer's shape comes from:

* redirect: RFC 9110 15.4.3, `302 Found` with `Location` naming the same path -- what a
  misconfigured proxy or a login redirect that lands on itself answers;
* `crs`: the 2008 GeoJSON specification's (geojson.org/geojson-spec.html, 3.1) named CRS
  member `{"type": "name", "properties": {"name": "EPSG:3857"}}`, as ArcGIS writes it on
  an f=geojson page in a CRS other than WGS84 (RFC 7946 dropped the member; servers
  still write it);
* `Retry-After`: RFC 9110 10.2.3, delay-seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fakes.arcgis import arcgis_fixture
from fakes.ckan import FakeCkan, ckan_fixture
from fakes.socrata import FakeSocrata, socrata_fixture
from feedledger.demo.featureserver import SERVICE, FakeArcGIS, parcels
from feedledger.demo.local_server import Reply, Request
from helpers import Cli

_ = (arcgis_fixture, socrata_fixture, ckan_fixture)  # the `arcgis`, `socrata`, `ckan` fixtures

LAYER = f"{SERVICE}/FeatureServer/0"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries wait through an injectable sleep: recorded here, never slept."""
    waited: list[float] = []
    monkeypatch.setattr("feedledger.sources.portal.default_sleep", waited.append)
    return waited


def add(cli: Cli, fake: FakeArcGIS, *extra: str) -> None:
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", fake.url,
        "--key", "PARCEL_ID", *extra)  # fmt: skip


def one_line(result: Any) -> str:
    message: str = result.stderr.strip()
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in message and len(message.splitlines()) == 1, message
    return message


def nothing_kept(cli: Cli, source: str) -> None:
    assert cli.json("runs", source) == []
    root = cli.ws.archive_root
    assert not [p for p in root.rglob("*") if p.is_file()], "something was archived"


# -- a redirect loop ---------------------------------------------------------------------


def loop_at(path_end: str, route: Any) -> Any:
    def redirecting(request: Request) -> Reply:
        if request.path.endswith(path_end):  # 302 back to the very same path
            return Reply(302, b"", "text/html", {"Location": request.path})
        return route(request)

    return redirecting


@pytest.mark.parametrize("where", ["metadata", "query page"])
def test_an_arcgis_redirect_loop_is_one_line_exit_11(
    cli: Cli, arcgis: FakeArcGIS, where: str
) -> None:
    assert arcgis.server is not None
    end = "/FeatureServer/0" if where == "metadata" else "/query"
    arcgis.server.route = loop_at(end, arcgis.route)
    add(cli, arcgis)
    message = one_line(cli("run", "zoning", expect=11))
    assert "too many redirects" in message and "zoning" in message
    assert "nothing was archived" in message
    nothing_kept(cli, "zoning")


def test_a_socrata_redirect_loop_is_one_line_exit_11(cli: Cli, socrata: FakeSocrata) -> None:
    assert socrata.server is not None
    socrata.server.route = loop_at(".json", socrata.server.route)
    cli("source", "add", "parcels", "--connector", "socrata", "--format", "json",
        "--fetch", socrata.url, "--key", "parcel_id")  # fmt: skip
    message = one_line(cli("run", "parcels", expect=11))
    assert "too many redirects" in message and "parcels" in message
    nothing_kept(cli, "parcels")


def test_a_ckan_redirect_loop_on_the_resource_is_one_line_exit_11(cli: Cli, ckan: FakeCkan) -> None:
    assert ckan.server is not None
    ckan.resources = {"parcels.csv": ("CSV", b"parcel_id,z\n1,R-1\n", None)}
    ckan.server.route = loop_at(".csv", ckan.server.route)  # package_show answers
    cli("source", "add", "parcels", "--connector", "ckan", "--format", "csv", "--fetch",
        ckan.url, "--resource", "parcels.csv", "--key", "parcel_id")  # fmt: skip
    message = one_line(cli("run", "parcels", expect=11))
    assert "too many redirects" in message and "parcels.csv" in message
    nothing_kept(cli, "parcels")


# -- an edit date no calendar holds ------------------------------------------------------


@pytest.mark.parametrize("date", [1e20, float("nan"), float("inf")], ids=["1e20", "nan", "inf"])
def test_an_impossible_edit_date_is_one_line_exit_4(
    cli: Cli, arcgis: FakeArcGIS, date: float
) -> None:
    arcgis.edit_date = date  # type: ignore[assignment]  # json.dumps writes NaN, Infinity
    add(cli, arcgis)
    message = one_line(cli("run", "zoning", expect=4))
    assert "editingInfo.dataLastEditDate" in message and "is not a date" in message
    assert "zoning" in message and "nothing was archived" in message
    nothing_kept(cli, "zoning")


def test_an_impossible_socrata_date_is_one_line_exit_4(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows_updated_at = 10**20  # epoch seconds: no year holds it
    cli("source", "add", "parcels", "--connector", "socrata", "--format", "json",
        "--fetch", socrata.url, "--key", "parcel_id")  # fmt: skip
    message = one_line(cli("run", "parcels", expect=4))
    assert "rowsUpdatedAt" in message and "is not a date" in message
    nothing_kept(cli, "parcels")


# -- Retry-After beyond the deadline -------------------------------------------------------


def test_a_retry_after_beyond_the_deadline_says_the_server_asked_for_it(
    cli: Cli, arcgis: FakeArcGIS, sleeps: list[float]
) -> None:
    assert arcgis.server is not None
    route = arcgis.route

    def busy(request: Request) -> Reply:
        if request.path.endswith("/query"):
            return Reply(429, b"Too Many Requests", "text/plain", {"Retry-After": "100000"})
        return route(request)

    arcgis.server.route = busy
    add(cli, arcgis, "--fetch-deadline", "30")
    message = one_line(cli("run", "zoning", expect=11))
    assert "HTTP 429" in message and "asked to wait 100000 s (Retry-After)" in message
    assert "fetch_deadline_s of 30 s" in message and "took longer" not in message
    assert sleeps == []  # given up at once: no wait can end within the deadline
    nothing_kept(cli, "zoning")


# -- a projected CRS taken for WGS84 --------------------------------------------------------


def stating_crs(arcgis: FakeArcGIS, crs: dict[str, Any], *, projected: bool) -> None:
    """The fake's f=geojson pages carry `crs`; `projected`: their coordinates are the
    layer's own feet (outSR ignored), as a server answering in another CRS sends them."""
    assert arcgis.server is not None
    route = arcgis.route

    def answer(request: Request) -> Reply:
        if projected and request.path.endswith("/query"):
            request = Request(request.path, {k: v for k, v in request.query.items()
                                             if k != "outSR"})  # fmt: skip
        reply = route(request)
        if request.query.get("f") != "geojson" or reply.status != 200:
            return reply
        body = json.loads(reply.body)
        if body.get("type") == "FeatureCollection":
            body = {"type": body["type"], "crs": crs, **body}
        return Reply(200, json.dumps(body).encode(), reply.content_type, reply.headers)

    arcgis.server.route = answer


def test_a_geojson_page_stating_a_projected_crs_is_refused(cli: Cli, arcgis: FakeArcGIS) -> None:
    stating_crs(arcgis, {"type": "name", "properties": {"name": "EPSG:3857"}}, projected=True)
    add(cli, arcgis)
    message = one_line(cli("run", "zoning", expect=4))
    assert "crs is EPSG:3857" in message and "not longitude/latitude" in message
    nothing_kept(cli, "zoning")


@pytest.mark.parametrize(
    "name",
    [
        "urn:ogc:def:crs:OGC:1.3:CRS84",
        "EPSG:4326",
        "urn:ogc:def:crs:EPSG::4326",
        "urn:ogc:def:crs:EPSG:4326",
    ],
)
def test_a_geojson_page_stating_wgs84_is_taken(cli: Cli, arcgis: FakeArcGIS, name: str) -> None:
    arcgis.features = parcels(12)
    stating_crs(arcgis, {"type": "name", "properties": {"name": name}}, projected=False)
    add(cli, arcgis)
    assert cli.json("run", "zoning")["changes"] == 12


def test_projected_coordinates_without_a_crs_are_refused_as_degrees(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    """A server that ignores outSR=4326 and states no crs: the layer is read as WGS84,
    and its feet (x ~ 6,000,000) cannot be longitudes."""
    arcgis.features = parcels(12)
    assert arcgis.server is not None
    route = arcgis.route

    def ignores_out_sr(request: Request) -> Reply:
        query = {k: v for k, v in request.query.items() if k != "outSR"}
        return route(Request(request.path, query))

    arcgis.server.route = ignores_out_sr
    add(cli, arcgis)
    message = one_line(cli("run", "zoning", expect=4))
    assert "coordinates outside longitude -180..180 / latitude -90..90" in message
    assert "rows 1, 2, 3, 4, 5 and 7 more" in message and "EPSG:4326" in message
    assert cli.json("runs", "zoning") == []
    assert cli.json("archive", "list", "zoning", "--rejected")  # the bytes kept for a look


def geojson_file(path: Path, *, crs: str | None, x: float) -> Path:
    collection: dict[str, Any] = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "properties": {"id": "a"},
             "geometry": {"type": "Point", "coordinates": [x, 45.0]}},
        ],
    }  # fmt: skip
    if crs is not None:
        collection["crs"] = {"type": "name", "properties": {"name": crs}}
    path.write_text(json.dumps(collection))
    return path


def test_a_geojson_file_in_metres_is_read_in_its_stated_crs_or_refused_without_one(
    cli: Cli, tmp_path: Path
) -> None:
    cli("source", "add", "pts", "--format", "geojson", "--key", "id")
    # no crs: GDAL reads WGS84, and x = 1,113,194 m cannot be a longitude
    bare = geojson_file(tmp_path / "pts_2026-06-01.geojson", crs=None, x=1_113_194.9)
    message = one_line(cli("ingest", "pts", str(bare), "--published-at", "2026-06-01",
                           expect=4))  # fmt: skip
    assert "row 1: coordinates outside longitude" in message
    # the same metres stating EPSG:3857: honoured, recorded as stated
    stated = geojson_file(tmp_path / "pts_2026-06-02.geojson", crs="EPSG:3857", x=1_113_194.9)
    assert cli.json("ingest", "pts", str(stated), "--published-at", "2026-06-02")["changes"] == 1
    (version,) = cli.json("history", "pts", "a")
    assert version["geometry"]["coordinates"] == [1_113_194.9, 45.0]
    # degrees in range, stated or not, are read as before
    good = geojson_file(tmp_path / "deg.geojson", crs=None, x=-179.5)
    cli("source", "add", "deg", "--format", "geojson", "--key", "id")
    assert cli.json("ingest", "deg", str(good), "--published-at", "2026-06-01")["changes"] == 1


# -- a connector's date declaration ---------------------------------------------------------


def test_a_connector_source_is_dated_by_its_portal_not_a_file_name(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    add(cli, arcgis)
    text = cli.ws.config_path.read_text()
    assert 'published_from = "connector"' in text and '"filename"' not in text
    (declared,) = [s for s in cli.json("source", "list") if s["name"] == "zoning"]
    assert declared["published_from"] == "connector"
    # a workspace written before: "filename" under a connector reads as "connector"
    cli.ws.config_path.write_text(text.replace('"connector"\n', '"filename"\n', 1))
    (declared,) = [s for s in cli.json("source", "list") if s["name"] == "zoning"]
    assert declared["published_from"] == "connector"
    assert cli.json("run", "zoning")["changes"] == 25
    # a header date is a plain HTTP fetch's, not a portal's; "connector" needs one
    refused = one_line(cli("source", "add", "zoning", "--connector", "arcgis", "--fetch",
                           arcgis.url, "--key", "PARCEL_ID", "--published-from",
                           "header:Last-Modified", "--replace", expect=2))  # fmt: skip
    assert "dated by its portal" in refused
    refused = one_line(cli("source", "add", "plain", "--key", "id", "--published-from",
                           "connector", expect=2))  # fmt: skip
    assert "only for a --connector source" in refused
