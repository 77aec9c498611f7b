"""The ArcGIS REST fetcher (sources/arcgis.py) against the fake FeatureServer/MapServer of
feedledger/demo/featureserver.py, at its three flavours: 10.3 (ids + objectIds batches,
Esri JSON converted with arcgis2geojson), 10.8 (GeoJSON paging without
exceededTransferLimit: a short page ends it) and 11.1 (GeoJSON paging with
properties.exceededTransferLimit)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from fakes.arcgis import arcgis_fixture
from feedledger.demo.featureserver import FLAVOURS, FakeArcGIS, parcels, running, to_wgs84
from feedledger.demo.local_server import Reply, Request
from feedledger.model.errors import BadPayloadError, FeedledgerError
from feedledger.sources.arcgis import CONTENT_TYPE, Layer, fetch_layer

_ = arcgis_fixture  # the `arcgis` fixture

pytestmark = pytest.mark.parametrize("arcgis", FLAVOURS, indirect=True)


class Sleeps:
    """An injected sleep that only records (not a list: an empty one would be falsy)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def features(layer: Layer) -> list[dict[str, Any]]:
    assert layer.data is not None
    return [json.loads(line) for line in layer.data.decode().splitlines()]


def ids(layer: Layer) -> list[int]:
    return [f["properties"]["OBJECTID"] for f in features(layer)]


@pytest.mark.parametrize("layer", ["FeatureServer", "MapServer"])
def test_whole_layer_as_geojson_sequence(arcgis: FakeArcGIS, layer: str) -> None:
    arcgis.features = parcels(47)
    got = fetch_layer(arcgis.url if layer == "FeatureServer" else arcgis.map_url)
    assert got.content_type == CONTENT_TYPE and got.published_ms == arcgis.edit_date
    assert ids(got) == list(range(1, 48))
    first = features(got)[0]
    assert first["id"] == 1 and first["type"] == "Feature"
    assert first["properties"] == {"OBJECTID": 1, "PARCEL_ID": "P0000001", "ZONING": "R-2"}
    x, y = 6_000_100.0, 2_000_000.0  # oid 1; GeoJSON outer rings counter-clockwise
    ring = [[x, y], [x + 90.0, y], [x + 90.0, y + 90.0], [x, y + 90.0], [x, y]]
    # asked outSR=4326: WGS84 degrees (the fake's stand-in projection), whatever the layer's
    wgs84 = [to_wgs84(px, py) for px, py in ring]
    assert first["geometry"] == {"type": "Polygon", "coordinates": [wgs84]}
    assert {r.query["outSR"] for r in arcgis.feature_requests} == {"4326"}
    meta = got.metadata
    assert meta["count"] == 47 and meta["wkid"] == 2227 and meta["object_id_field"] == "OBJECTID"
    assert meta["out_wkid"] == 4326 and meta["connector"] == "arcgis"
    assert [f["name"] for f in meta["fields"]] == ["OBJECTID", "PARCEL_ID", "ZONING"]
    assert meta["editing_info"]["lastEditDate"] == arcgis.edit_date
    assert meta["server_version"] == {"10.3": 10.3, "10.8": 10.81, "11.1": 11.1}[arcgis.flavour]
    # f=geojson from 10.4 where supportedQueryFormats lists geoJSON; 10.3: Esri JSON by ids
    expected = ("json", "object-ids") if arcgis.flavour == "10.3" else ("geojson", "offset")
    assert (meta["query_format"], meta["paging"]) == expected
    # maxRecordCount (10) honoured: 5 feature pages, ordered by the object-id field
    pages = arcgis.feature_requests
    assert len(pages) == 5  # 10.8: the short fifth page ends it (no exceededTransferLimit)
    assert all(int(r.query.get("resultRecordCount", "10")) <= 10 for r in pages)
    if arcgis.flavour != "10.3":
        assert {r.query["orderByFields"] for r in pages} == {"OBJECTID"}
        assert [r.query["resultOffset"] for r in pages] == ["0", "10", "20", "30", "40"]
    else:
        assert [len(r.query["objectIds"].split(",")) for r in pages] == [10, 10, 10, 10, 7]
    assert any(r.query.get("returnCountOnly") == "true" for r in arcgis.query_requests)


def test_same_features_at_every_flavour(arcgis: FakeArcGIS) -> None:
    """Esri JSON converted and GeoJSON as served give the same features; the GeoJSON
    lines are the server's own feature texts, never re-serialised."""
    got = fetch_layer(arcgis.url, page_size=4)
    with running("11.1") as modern:
        assert features(got) == features(fetch_layer(modern.url))
    assert len(arcgis.feature_requests) == 7  # ceil(25 / 4)
    assert got.data is not None and got.data.endswith(b"}\n")
    if arcgis.flavour != "10.3":  # the fake writes json.dumps' default ", " separators
        assert b'{"type": "Feature", "id": 1, ' in got.data


def test_nothing_new_sends_no_query(arcgis: FakeArcGIS) -> None:
    got = fetch_layer(arcgis.url, since_ms=arcgis.edit_date)
    assert got.nothing_new and got.data is None and got.published_ms == arcgis.edit_date
    assert arcgis.query_requests == [] and len(arcgis.server.log) == 1  # type: ignore[union-attr]
    later = fetch_layer(arcgis.url, since_ms=arcgis.edit_date - 1)
    assert not later.nothing_new and len(ids(later)) == 25


def test_date_falls_back_to_last_modified_then_fails_clearly(arcgis: FakeArcGIS) -> None:
    arcgis.editing_info = False
    arcgis.last_modified = "Tue, 01 Sep 2026 10:00:00 GMT"
    dated = 1_788_256_800_000  # the header's instant, epoch ms
    assert fetch_layer(arcgis.url, since_ms=dated - 1).published_ms == dated
    assert fetch_layer(arcgis.url, since_ms=dated).nothing_new
    del arcgis.server.log[:]  # type: ignore[union-attr]
    arcgis.last_modified = None
    with pytest.raises(BadPayloadError) as caught:
        fetch_layer(arcgis.url)
    message = str(caught.value)
    assert "dataLastEditDate" in message and "lastEditDate" in message
    assert "Last-Modified" in message and "--published-from" in (caught.value.hint or "")
    assert arcgis.query_requests == []


def test_republished_while_paging_restarts_once(arcgis: FakeArcGIS) -> None:
    arcgis.republish_after_pages = 2
    got = fetch_layer(arcgis.url)
    assert got.published_ms == arcgis.edit_date  # the date after the republish
    first = features(got)[0]
    assert first["properties"]["ZONING"].startswith("MU-")  # the pages were downloaded again
    assert got.metadata["editing_info"]["lastEditDate"] == arcgis.edit_date
    assert len(arcgis.feature_requests) == 6  # 3 discarded + 3


def test_republished_twice_fails(arcgis: FakeArcGIS) -> None:
    def republish_at_each_download(request: Request) -> Reply:
        if request.query.get("returnCountOnly") == "true":  # each download starts so
            arcgis.republish()
        return route(request)

    route = arcgis.route
    arcgis.server.route = republish_at_each_download  # type: ignore[union-attr]
    with pytest.raises(FeedledgerError, match="republished while it was downloaded, twice"):
        fetch_layer(arcgis.url)


def test_server_ignoring_offsets_is_caught_not_looped(arcgis: FakeArcGIS) -> None:
    """A server that claims pagination but ignores resultOffset answers page one again."""

    def claims_paging(request: Request) -> Reply:
        if not request.path.endswith("/query"):
            meta = json.loads(route(request).body)
            meta["advancedQueryCapabilities"]["supportsPagination"] = True
            meta["supportedQueryFormats"] = "JSON"
            return Reply(200, json.dumps(meta).encode())
        if "resultOffset" in request.query:
            request.query["resultOffset"] = "0"
        return route(request)

    route = arcgis.route
    arcgis.server.route = claims_paging  # type: ignore[union-attr]
    with pytest.raises(BadPayloadError, match=r"object id 1 was answered twice.*resultOffset"):
        fetch_layer(arcgis.url)
    assert len(arcgis.feature_requests) == 3  # the repeat is seen on page 2; page 3 asked ahead


def test_count_mismatch_is_refused(arcgis: FakeArcGIS) -> None:
    def undercounts(request: Request) -> Reply:
        if request.query.get("returnCountOnly") == "true":
            return Reply(200, b'{"count": 24}')
        return route(request)

    route = arcgis.route
    arcgis.server.route = undercounts  # type: ignore[union-attr]
    with pytest.raises(BadPayloadError, match="returnCountOnly said 24"):
        fetch_layer(arcgis.url)


def test_error_as_200_names_code_and_message(arcgis: FakeArcGIS) -> None:
    arcgis.errors_first = [500]
    with pytest.raises(FeedledgerError) as caught:
        fetch_layer(arcgis.url)
    message = str(caught.value)
    assert "ArcGIS error 500" in message and "Error performing query operation." in message
    assert "\n" not in message


def test_token_sent_as_parameter_and_never_shown(
    arcgis: FakeArcGIS, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx logs each request URL at INFO
    arcgis.token = "s3cret-t0ken"
    got = fetch_layer(arcgis.url, token="s3cret-t0ken")
    assert len(ids(got)) == 25
    assert all(r.query["token"] == "s3cret-t0ken" for r in arcgis.server.log)  # type: ignore[union-attr]
    assert "s3cret-t0ken" not in json.dumps(got.metadata)
    with pytest.raises(FeedledgerError) as missing:
        fetch_layer(arcgis.url)
    assert "ArcGIS error 499" in str(missing.value) and "Token Required." in str(missing.value)
    with pytest.raises(FeedledgerError) as wrong:
        fetch_layer(arcgis.url, token="wr0ng-t0ken")
    assert "ArcGIS error 498" in str(wrong.value) and "wr0ng-t0ken" not in str(wrong.value)
    assert "token" in (wrong.value.hint or "")
    assert "GET http://127.0.0.1" in caplog.text and "token=***" in caplog.text
    assert "t0ken" not in caplog.text
    assert logging.getLogger("httpx").filters == []  # the mask is gone after the fetch


def test_429_and_5xx_retried_with_bounded_backoff(arcgis: FakeArcGIS) -> None:
    arcgis.fail_first = [429, 503, 502]
    sleeps = Sleeps()
    got = fetch_layer(arcgis.url, sleep=sleeps)
    assert len(ids(got)) == 25
    assert sleeps.waits == [1.0, 1.0, 1.0]  # the fake's Retry-After: 1
    arcgis.fail_first = [503] * 10
    with pytest.raises(FeedledgerError, match=r"HTTP 503.*after 5 attempts"):
        fetch_layer(arcgis.url, sleep=Sleeps())


def test_hang_bounded_by_deadline(arcgis: FakeArcGIS) -> None:
    arcgis.hang = True
    with pytest.raises(FeedledgerError, match=r"fetch_deadline_s of 0\.5 s"):
        fetch_layer(arcgis.url, fetch_deadline_s=0.5)


def test_size_limit_across_pages(arcgis: FakeArcGIS) -> None:
    whole = fetch_layer(arcgis.url).data
    assert whole is not None
    with pytest.raises(BadPayloadError, match="max_payload_bytes"):
        fetch_layer(arcgis.url, max_payload_bytes=len(whole) - 1)


def test_html_login_page_refused(arcgis: FakeArcGIS) -> None:
    def login_page(request: Request) -> Reply:
        return Reply(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html")

    arcgis.server.route = login_page  # type: ignore[union-attr]
    with pytest.raises(BadPayloadError, match="HTML page"):
        fetch_layer(arcgis.url)


def test_missing_object_id_is_caught(arcgis: FakeArcGIS) -> None:
    """A feature the server leaves out of its pages (but counts) fails the download."""

    def drops_seven(request: Request) -> Reply:
        reply = route(request)
        body = json.loads(reply.body)
        if isinstance(body.get("features"), list):
            body["features"] = [f for f in body["features"] if "P0000007" not in json.dumps(f)]
            return Reply(200, json.dumps(body).encode())
        return reply

    route = arcgis.route
    arcgis.server.route = drops_seven  # type: ignore[union-attr]
    # paging by offset, the next page then starts one feature early: a repeated id; a
    # 10.8 GeoJSON page does not say more follow: its short page ends it, the count fails
    expected = {
        "10.3": r"\[7\].*not answered",
        "10.8": "held 9 feature.*returnCountOnly said 25",
    }.get(arcgis.flavour, "10 was answered twice")
    with pytest.raises(BadPayloadError, match=expected):
        fetch_layer(arcgis.url)


def test_pretty_printed_pages_still_one_feature_per_line(arcgis: FakeArcGIS) -> None:
    """A server that indents its JSON (`f=pjson`-like): each feature still lands on one
    line, with the same content; members in another order are read too."""

    def indented(request: Request) -> Reply:
        reply = route(request)
        body = json.loads(reply.body)
        if isinstance(body, dict) and "features" in body:
            body = {k: body[k] for k in reversed(list(body))}  # features not first/last
            return Reply(200, json.dumps(body, indent=2).encode())
        return reply

    plain = fetch_layer(arcgis.url)
    route = arcgis.route
    arcgis.server.route = indented  # type: ignore[union-attr]
    pretty = fetch_layer(arcgis.url)
    assert pretty.data is not None and len(pretty.data.splitlines()) == 25
    assert features(pretty) == features(plain)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"features": [{"type": "Feature"}] } trailing', "extra data after the answer"),
        (b'{"features": [{"type": "Feature"} {"type": "Feature"}]}', "between features"),
        (b'{"type": "FeatureCollection"}', "no features list"),
        (b'{"error": {"code": 400, "message": "Bad page."}}', "ArcGIS error 400 'Bad page.'"),
    ],
)
def test_broken_feature_pages_fail_in_one_line(
    arcgis: FakeArcGIS, body: bytes, needle: str
) -> None:
    def broken_pages(request: Request) -> Reply:
        q = request.query
        if request.path.endswith("/query") and "outSR" in q:
            return Reply(200, body)
        return route(request)

    route = arcgis.route
    arcgis.server.route = broken_pages  # type: ignore[union-attr]
    with pytest.raises(FeedledgerError) as caught:
        fetch_layer(arcgis.url)
    assert needle in str(caught.value) and "\n" not in str(caught.value)
