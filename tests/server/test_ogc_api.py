"""`serve`'s OGC API - Features over FastAPI's TestClient, on SQLite and PostgreSQL: the
landing page's links, conformance, the collections with their extent, items pages
(GeoJSON FeatureCollection with numberMatched, numberReturned, timeStamp and
self/next/prev links, `application/geo+json`) walked through `next`, one item,
`datetime` as valid time (a date is the whole day; an interval keeps what was published
in it), the vendor `known_at`, 400 for each bad parameter, 404 for an unknown
collection or feature, 409 inside a gap and before the first observation."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens
from ogc_layers import DAYS, build, in_bbox

GEOJSON = "application/geo+json"
CRS84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"


@pytest.fixture
def client(workspace: Workspace) -> Iterator[TestClient]:
    with fl.open(workspace.config_path) as led:
        build(led)
    app = create_app(functools.partial(fl.open, workspace.config_path), parse_tokens(None))
    with TestClient(app) as c:
        yield c


def get(client: TestClient, url: str, status: int = 200) -> Any:
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.text)
    return r


def walk(client: TestClient, url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every feature, following `next` from `url`; and each page's body."""
    features: list[dict[str, Any]] = []
    pages = []
    while url:
        r = get(client, url)
        assert r.headers["content-type"] == GEOJSON
        body = r.json()
        pages.append(body)
        features += body["features"]
        nxt = [link["href"] for link in body["links"] if link["rel"] == "next"]
        url = nxt[0] if nxt else ""
    return features, pages


def test_landing_page_and_conformance(client: TestClient) -> None:
    body = get(client, "/ogc").json()
    rels = {link["rel"]: link for link in body["links"]}
    assert {"self", "service-desc", "conformance", "data"} <= set(rels)
    assert rels["data"]["href"].endswith("/ogc/collections")
    assert get(client, rels["service-desc"]["href"]).json()["paths"]["/ogc/collections"]
    conf = get(client, "/ogc/conformance").json()["conformsTo"]
    assert "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core" in conf
    assert "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson" in conf


def test_collections_say_their_extent(client: TestClient) -> None:
    body = get(client, "/ogc/collections").json()
    found = {c["id"]: c for c in body["collections"]}
    assert set(found) == {"parcels", "owners"}
    parcels = found["parcels"]
    assert parcels == get(client, "/ogc/collections/parcels").json()
    assert parcels["extent"]["temporal"]["interval"] == [["2026-08-01T00:00:00Z", None]]
    bbox = parcels["extent"]["spatial"]["bbox"][0]
    assert bbox[0] == -105.0 and bbox[1] == 40.0 and parcels["storageCrs"] == CRS84
    items = [link for link in parcels["links"] if link["rel"] == "items"]
    assert items[0]["type"] == GEOJSON
    assert "spatial" not in found["owners"]["extent"]


def test_items_walked_through_next_are_the_current_layer(client: TestClient) -> None:
    features, pages = walk(client, "/ogc/collections/parcels/items?limit=6")
    assert [f["id"] for f in features] == sorted(DAYS[2])
    for f in features:
        props, geom = DAYS[2][f["id"]]
        assert f["type"] == "Feature" and f["properties"] == props and f["geometry"] == geom
    first, last = pages[0], pages[-1]
    assert first["type"] == "FeatureCollection" and first["numberMatched"] == len(DAYS[2])
    assert first["numberReturned"] == 6 and first["timeStamp"].endswith("Z")
    assert not [link for link in first["links"] if link["rel"] == "prev"]
    prev = [link["href"] for link in last["links"] if link["rel"] == "prev"]
    assert parse_qs(urlsplit(prev[0]).query)["offset"] == [str(6 * (len(pages) - 2))]
    assert [link["rel"] for link in last["links"]] == ["self", "prev"]


def test_bbox_and_datetime_filter(client: TestClient) -> None:
    box = (-104.985, 40.005, -104.955, 40.025)
    url = "/ogc/collections/parcels/items?limit=4&bbox=" + ",".join(map(str, box))
    features, pages = walk(client, url)
    want = sorted(k for k, (_p, g) in DAYS[2].items() if in_bbox(g, box))
    assert [f["id"] for f in features] == want and pages[0]["numberMatched"] == len(want)
    for link in pages[0]["links"]:
        assert parse_qs(urlsplit(link["href"]).query)["bbox"] == [",".join(map(str, box))]
    day2, _ = walk(client, "/ogc/collections/parcels/items?limit=50&datetime=2026-08-02")
    assert [f["id"] for f in day2] == sorted(DAYS[1])
    at_noon, _ = walk(client, "/ogc/collections/parcels/items?datetime=2026-08-01T12:00:00Z")
    assert [f["id"] for f in at_noon] == sorted(DAYS[0])
    changed, _ = walk(client, "/ogc/collections/parcels/items?datetime=2026-08-02/2026-08-02")
    assert {f["id"] for f in changed} == {k for k, v in DAYS[1].items() if DAYS[0].get(k) != v}
    whole, _ = walk(client, "/ogc/collections/parcels/items?limit=100&datetime=../2026-08-02")
    assert len(whole) == len(DAYS[1])
    since, _ = walk(client, "/ogc/collections/parcels/items?datetime=2026-08-05T00:00:00Z/..")
    assert {f["id"] for f in since} == {"P010", "P011"}


def test_one_item_and_known_at(client: TestClient) -> None:
    r = get(client, "/ogc/collections/parcels/items/P010")
    assert r.headers["content-type"] == GEOJSON
    body = r.json()
    assert body["id"] == "P010" and body["properties"]["floors"] == 9
    assert {link["rel"] for link in body["links"]} == {"self", "collection"}
    old = get(client, "/ogc/collections/parcels/items/P010?datetime=2026-08-01").json()
    assert old["properties"]["floors"] == 2
    history = get(client, "/api/sources/parcels/entities/P040/history").json()
    known = quote(history[0]["recorded_at"])
    page = get(client, f"/ogc/collections/parcels/items?limit=100&known_at={known}").json()
    assert page["numberMatched"] == len(DAYS[1])
    owner = get(client, "/ogc/collections/owners/items/O3").json()
    assert owner["geometry"] is None and owner["properties"]["name"] == "name 3"


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("bbox=1,2,3", "bbox=1,2,3"),
        ("bbox=a,b,c,d", "4 comma-separated numbers"),
        ("bbox=0,5,1,4", "lower corner"),
        ("bbox=0,0,1,nan", "finite"),
        ("datetime=2026-13-01", "datetime=2026-13-01"),
        ("datetime=yesterday", "datetime=yesterday"),
        ("datetime=2026-08-05/2026-08-01", "start is after its end"),
        ("limit=0", "limit=0"),
        ("limit=ten", "limit=ten"),
        ("offset=-3", "offset=-3"),
        ("known_at=soon", "known_at=soon"),
        ("sortby=area", "unknown query parameter sortby"),
        ("f=html", "f=html"),
        ("crs=http://www.opengis.net/def/crs/EPSG/0/3857", "served in " + CRS84),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(client: TestClient, query: str, says: str) -> None:
    r = get(client, f"/ogc/collections/parcels/items?{query}", 400)
    assert r.headers["content-type"] == "application/problem+json"
    assert says in r.json()["detail"]


def test_unknown_and_not_observed(client: TestClient) -> None:
    r = get(client, "/ogc/collections/nowhere/items", 404)
    assert "nowhere" in r.json()["detail"]
    get(client, "/ogc/collections/nowhere", 404)
    assert "P031" in get(client, "/ogc/collections/parcels/items/P031", 404).json()["detail"]
    gap = get(client, "/ogc/collections/parcels/items?datetime=2026-08-03", 409).json()
    assert gap["type"] == "urn:feedledger:problem:in-gap" and "portal down" in gap["detail"]
    get(client, "/ogc/collections/parcels/items/P001?datetime=2026-08-04T06:00:00Z", 409)
    early = get(client, "/ogc/collections/parcels/items?datetime=2026-07-01", 409).json()
    assert early["type"] == "urn:feedledger:problem:not-observed"
    # an interval ending inside the gap is refused too
    get(client, "/ogc/collections/parcels/items?datetime=2026-08-01/2026-08-03", 409)


def test_limit_above_the_maximum_is_the_maximum(client: TestClient) -> None:
    body = get(client, "/ogc/collections/owners/items?limit=20000").json()
    assert body["numberReturned"] == 12 and body["numberMatched"] == 12


def test_the_api_pinned_at_a_valid_time(client: TestClient) -> None:
    landing = get(client, "/ogc/at/2026-08-02").json()
    data = [link["href"] for link in landing["links"] if link["rel"] == "data"]
    assert data[0].endswith("/ogc/at/2026-08-02/collections")
    items = [
        link["href"]
        for c in get(client, data[0]).json()["collections"]
        for link in c["links"]
        if link["rel"] == "items" and c["id"] == "parcels"
    ]
    features, pages = walk(client, items[0] + "?limit=9")
    assert [f["id"] for f in features] == sorted(DAYS[1])
    assert "/ogc/at/2026-08-02/collections/parcels/items" in pages[0]["links"][1]["href"]
    one = get(client, "/ogc/at/2026-08-01/collections/parcels/items/P000").json()
    assert one["properties"]["zoning"] == "R-1"
    get(client, "/ogc/at/2026-08-03/collections/parcels/items", 409)
    get(client, "/ogc/at/2026-08-02/collections/parcels/items?datetime=2026-08-01", 400)
