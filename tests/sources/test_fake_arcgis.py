"""The fake ArcGIS REST server (feedledger/demo/featureserver.py) answers as Esri
documents it, at each flavour: paging (or ids + objectIds batches at 10.3) covers every
object id exactly once, returnCountOnly matches, and the token, error-as-200, 429,
republish and hang behaviours."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from fakes.arcgis import arcgis_fixture
from feedledger.demo.featureserver import FLAVOURS, HANG_LIMIT_S, FakeArcGIS, parcels, running

_ = arcgis_fixture  # the `arcgis` fixture


def get(url: str, **params: Any) -> Any:
    response = httpx.get(url, params=params, timeout=10.0)
    assert response.status_code == 200, response.text
    return response.json()


def download(fake: FakeArcGIS, url: str) -> list[int]:
    """Every object id, fetched the way a client must at the fake's flavour."""
    meta = get(url, f="json")
    oid = meta["objectIdField"]
    size = meta["maxRecordCount"]
    seen: list[int] = []
    if not meta["advancedQueryCapabilities"]["supportsPagination"]:
        ids = get(f"{url}/query", where="1=1", returnIdsOnly="true", f="json")["objectIds"]
        for i in range(0, len(ids), size):
            batch = ",".join(str(x) for x in ids[i : i + size])
            page = get(f"{url}/query", objectIds=batch, outFields="*", f="json")
            seen += [f["attributes"][oid] for f in page["features"]]
        return seen
    geojson = meta["currentVersion"] >= 11 and "geoJSON" in meta["supportedQueryFormats"]
    offset = 0
    while True:
        params = {"where": "1=1", "outFields": "*", "orderByFields": oid}
        params |= {"resultOffset": offset, "resultRecordCount": size}
        page = get(f"{url}/query", f="geojson" if geojson else "json", **params)
        if geojson:
            seen += [f["properties"][oid] for f in page["features"]]
            more = page["properties"]["exceededTransferLimit"]
        else:
            seen += [f["attributes"][oid] for f in page["features"]]
            more = page.get("exceededTransferLimit", False)
        offset += len(page["features"])
        if not more:
            return seen


@pytest.mark.parametrize("arcgis", FLAVOURS, indirect=True)
@pytest.mark.parametrize("layer", ["FeatureServer", "MapServer"])
def test_paging_covers_every_object_id_once(arcgis: FakeArcGIS, layer: str) -> None:
    arcgis.features = parcels(47)
    url = arcgis.url if layer == "FeatureServer" else arcgis.map_url
    ids = download(arcgis, url)
    assert sorted(ids) == list(range(1, 48)) and len(set(ids)) == 47
    count = get(f"{url}/query", where="1=1", returnCountOnly="true", f="json")
    assert count == {"count": 47}
    assert len(arcgis.feature_requests) == 5  # ceil(47 / maxRecordCount 10)
    assert {r.path for r in arcgis.query_requests} == {
        f"/arcgis/rest/services/Zoning/{layer}/0/query"
    }


@pytest.mark.parametrize("arcgis", FLAVOURS, indirect=True)
def test_metadata_shapes(arcgis: FakeArcGIS) -> None:
    meta = get(arcgis.url, f="json")
    assert meta["objectIdField"] == "OBJECTID"
    assert [f["name"] for f in meta["fields"]] == ["OBJECTID", "PARCEL_ID", "ZONING"]
    assert meta["extent"]["spatialReference"]["wkid"] == 2227
    assert meta["sourceSpatialReference"]["wkid"] == 2227
    assert meta["editingInfo"]["lastEditDate"] == arcgis.edit_date
    if arcgis.flavour == "10.3":
        assert "dataLastEditDate" not in meta["editingInfo"]
        assert meta["advancedQueryCapabilities"]["supportsPagination"] is False
    else:
        assert meta["editingInfo"]["dataLastEditDate"] == arcgis.edit_date
        assert meta["supportedQueryFormats"] == "JSON, geoJSON, PBF"
    arcgis.editing_info = False
    arcgis.last_modified = "Tue, 01 Sep 2026 10:00:00 GMT"
    response = httpx.get(arcgis.url, params={"f": "json"})
    assert "editingInfo" not in response.json()
    assert response.headers["Last-Modified"] == "Tue, 01 Sep 2026 10:00:00 GMT"


def test_esri_json_and_geojson_feature_shapes(arcgis: FakeArcGIS) -> None:
    params = {"where": "1=1", "outFields": "PARCEL_ID", "resultRecordCount": 2}
    esri = get(f"{arcgis.url}/query", f="json", **params)
    assert esri["exceededTransferLimit"] is True
    assert esri["spatialReference"]["wkid"] == 2227
    first = esri["features"][0]
    assert first["attributes"] == {"PARCEL_ID": "P0000001"}
    ring = first["geometry"]["rings"][0]
    assert ring[0] == ring[-1] and len(ring) == 5
    geo = get(f"{arcgis.url}/query", f="geojson", **params)
    assert geo["type"] == "FeatureCollection"
    assert geo["properties"] == {"exceededTransferLimit": True}
    assert geo["features"][0]["geometry"]["coordinates"][0] == ring[::-1]  # RFC 7946 winding
    last = get(f"{arcgis.url}/query", f="json", where="1=1", resultOffset=20, resultRecordCount=10)
    assert len(last["features"]) == 5 and "exceededTransferLimit" not in last


def test_without_pagination_offsets_are_ignored_and_geojson_refused() -> None:
    with running("10.3") as fake:
        page = get(f"{fake.url}/query", f="json", where="1=1", resultOffset=10)
        assert page["features"][0]["attributes"]["OBJECTID"] == 1  # first page again
        refused = get(f"{fake.url}/query", f="geojson", where="1=1")
        assert refused["error"]["code"] == 400


def test_token_required_and_errors_answered_as_http_200(arcgis: FakeArcGIS) -> None:
    arcgis.token = "s3cret"
    assert get(arcgis.url, f="json")["error"]["code"] == 499
    wrong = get(f"{arcgis.url}/query", f="json", token="nope")
    assert wrong == {"error": {"code": 498, "message": "Invalid token.", "details": []}}
    assert get(arcgis.url, f="json", token="s3cret")["objectIdField"] == "OBJECTID"
    arcgis.errors_first = [500]
    failed = get(f"{arcgis.url}/query", f="json", where="1=1", token="s3cret")
    assert failed["error"]["code"] == 500
    assert "features" in get(f"{arcgis.url}/query", f="json", where="1=1", token="s3cret")
    assert [r.query.get("token") for r in arcgis.server.log if r.query] == [  # type: ignore[union-attr]
        None,
        "nope",
        "s3cret",
        "s3cret",
        "s3cret",
    ]


def test_429_with_retry_after(arcgis: FakeArcGIS) -> None:
    arcgis.fail_first = [429, 503]
    first = httpx.get(f"{arcgis.url}/query", params={"f": "json"})
    assert first.status_code == 429 and first.headers["Retry-After"] == "1"
    assert httpx.get(f"{arcgis.url}/query", params={"f": "json"}).status_code == 503
    assert httpx.get(f"{arcgis.url}/query", params={"f": "json"}).status_code == 200


@pytest.mark.parametrize("arcgis", ["10.8", "11.1"], indirect=True)
def test_republish_after_page_n_changes_date_and_data(arcgis: FakeArcGIS) -> None:
    arcgis.republish_after_pages = 2
    before = get(arcgis.url, f="json")["editingInfo"]["dataLastEditDate"]
    for offset in (0, 10, 20):
        get(f"{arcgis.url}/query", f="json", where="1=1", resultOffset=offset)
    after = get(arcgis.url, f="json")["editingInfo"]["dataLastEditDate"]
    assert after == before + 60_000
    again = get(f"{arcgis.url}/query", f="json", where="1=1", objectIds="1")
    assert again["features"][0]["attributes"]["ZONING"].startswith("MU-")
    arcgis.pages_served = 0  # once per setting: a later download is undisturbed
    arcgis.republish_after_pages = None
    download(arcgis, arcgis.url)
    assert get(arcgis.url, f="json")["editingInfo"]["dataLastEditDate"] == after


def test_hang_is_released_at_teardown() -> None:
    answers: list[int] = []

    def client(url: str) -> None:
        answers.append(httpx.get(f"{url}/query", params={"f": "json"}, timeout=60.0).status_code)

    with running() as fake:
        fake.hang = True
        with pytest.raises(httpx.ReadTimeout):
            # only the answer is awaited briefly: connecting under a loaded machine may
            # take longer than 0.3 s, which is not the hang under test
            httpx.get(
                f"{fake.url}/query", params={"f": "json"}, timeout=httpx.Timeout(30.0, read=0.3)
            )
        assert fake.hanging.acquire(timeout=HANG_LIMIT_S / 3)  # the first reached the fake
        waiting = threading.Thread(target=client, args=(fake.url,), daemon=True)
        waiting.start()
        # the second is hanging in the fake (not still connecting: under load that can
        # take longer than any fixed wait) and goes on hanging while the fake runs
        assert fake.hanging.acquire(timeout=HANG_LIMIT_S / 3)
        assert waiting.is_alive() and not answers
    waiting.join(HANG_LIMIT_S / 3)  # generous hang-detecting deadline, not a timing assertion
    assert not waiting.is_alive() and answers == [200]
