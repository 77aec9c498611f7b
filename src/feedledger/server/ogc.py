"""OGC API - Features (Part 1: Core, OGC 17-069r4) on `serve`: every declared source is
a collection a GIS client (QGIS, ArcGIS Pro, GDAL's OAPIF driver, OWSLib) reads
directly.

    /ogc                                       landing page (self, service-desc, conformance, data)
    /ogc/conformance                           core, geojson
    /ogc/collections                           the sources, each with its extent
    /ogc/collections/{source}                  one; extent: the current layer's bbox and
                                               the first publication (interval open-ended)
    /ogc/collections/{source}/items            a page of features (GeoJSON FeatureCollection,
                                               numberMatched/numberReturned/timeStamp,
                                               self/next/prev links)
    /ogc/collections/{source}/items/{id}       one feature
    /ogc/at/{datetime}/...                     the same, pinned at a valid time (an instant
                                               or a date): for a client that cannot send
                                               `datetime` (GDAL, QGIS: the connection URL)

Parameters (`server/ogc_params.py`): `bbox`, `datetime` (valid time), `limit`,
`offset`, the vendor parameter `known_at` (transaction time). A feature's `id` is its
key (a one-field key's value; a compound key's JSON array). A source without geometry
is served with `"geometry": null`. Coordinates are the layer's as stated: CRS84 for a
layer stated in EPSG:4326 (or with no CRS); another stated CRS is named in the
collection's `storageCrs` and the items' `Content-Crs` header, not reprojected.

Not observed is said, never papered over (invariant 12): a `datetime` inside a gap
answers 409 `in-gap` (the gap, the last and next observation), one before the
source's first observation 409 `not-observed` (`api.features`). A bad parameter is a
400 problem naming it; an unknown collection or feature 404.

The reads are blocking I/O: they run in the entity readers' threads (`deps.in_reader`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

import feedledger as fl
from feedledger.server import ogc_params
from feedledger.server.deps import JSONText, in_reader, ledger

router = APIRouter(prefix="/ogc", tags=["OGC API - Features"])

GEOJSON = "application/geo+json"
JSON = "application/json"
OPENAPI = "application/vnd.oai.openapi+json;version=3.1"
CONFORMANCE = [
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
]
GREGORIAN = "http://www.opengis.net/def/uom/ISO-8601/0/Gregorian"
_WGS84 = {"EPSG:4326", "OGC:CRS84", "CRS84", "WGS84"}

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: {"description": "A bad parameter (named)", "content": {"application/problem+json": {}}},
    404: {"description": "No such collection or feature"},
    409: {"description": "`datetime` inside a gap or before the first observation"},
}


class GeoJSONText(Response):
    media_type = GEOJSON


def _base(request: Request) -> str:
    """The API's root as this request reached it: `/ogc`, or `/ogc/at/{datetime}` (the
    layer pinned at a valid time, for clients that cannot send `datetime`)."""
    root = str(request.base_url).rstrip("/") + "/ogc"
    pinned = request.path_params.get("at")
    return root + (f"/at/{quote(pinned, safe='')}" if pinned else "")


def _pinned(request: Request) -> str | None:
    found = request.path_params.get("at")
    return str(found) if found else None


def _link(href: str, rel: str, kind: str, title: str | None = None) -> dict[str, str]:
    out = {"href": href, "rel": rel, "type": kind}
    if title:
        out["title"] = title
    return out


def landing(request: Request) -> JSONText:
    ogc_params.check_known(request.query_params, ogc_params.DOCUMENT)
    base = _base(request)
    root = str(request.base_url).rstrip("/")
    return JSONText(
        {
            "title": "feedledger",
            "description": "Each source as a layer: the state as published at a valid "
            "time (datetime) as known at a transaction time (known_at).",
            "links": [
                _link(base, "self", JSON, "This document"),
                _link(root + "/openapi.json", "service-desc", OPENAPI, "The API definition"),
                _link(root + "/docs", "service-doc", "text/html", "The API documentation"),
                _link(base + "/conformance", "conformance", JSON, "Conformance classes"),
                _link(base + "/collections", "data", JSON, "The sources as collections"),
            ],
        }
    )


def conformance(request: Request) -> JSONText:
    ogc_params.check_known(request.query_params, ogc_params.DOCUMENT)
    return JSONText({"conformsTo": CONFORMANCE})


async def collections(request: Request, led: fl.Ledger = Depends(ledger)) -> JSONText:
    ogc_params.check_known(request.query_params, ogc_params.DOCUMENT)
    base = _base(request)
    names = [s.name for s in led.sources(by_name=False)]
    found = [await in_reader(partial(_collection, led, name, base)) for name in names]
    return JSONText(
        {
            "links": [_link(base + "/collections", "self", JSON, "This document")],
            "collections": found,
        }
    )


async def collection(source: str, request: Request, led: fl.Ledger = Depends(ledger)) -> JSONText:
    ogc_params.check_known(request.query_params, ogc_params.DOCUMENT)
    return JSONText(await in_reader(partial(_collection, led, source, _base(request))))


async def items(source: str, request: Request, led: fl.Ledger = Depends(ledger)) -> Response:
    src = led.source(source)
    asked = ogc_params.items(request.query_params, src.config.timezone, _pinned(request))
    page = await in_reader(partial(_page, src, asked))
    ogc_params.coordinates(request.query_params, _crs_uri(page.crs))
    url = _base(request) + f"/collections/{quote(source, safe='')}/items"
    body = _collection_text(page, _page_links(url, request, page))
    return Response(body, media_type=GEOJSON, headers=_crs_header(page.crs))


async def item(
    source: str, key: str, request: Request, led: fl.Ledger = Depends(ledger)
) -> Response:
    src = led.source(source)
    ogc_params.check_known(request.query_params, ogc_params.ONE_ITEM)
    when = ogc_params.when(request.query_params, src.config.timezone, _pinned(request))
    layer = src.layer()
    found = await in_reader(partial(layer.feature, key, valid=when.valid, known_at=when.known_at))
    ogc_params.coordinates(request.query_params, _crs_uri(found.crs))
    collection_url = _base(request) + f"/collections/{quote(source, safe='')}"
    links = [
        _link(str(request.url), "self", GEOJSON, "This document"),
        _link(collection_url, "collection", JSON, "The collection"),
    ]
    body = found.geojson()[:-1] + ',"links":' + json.dumps(links) + "}"
    return Response(body, media_type=GEOJSON, headers=_crs_header(found.crs))


# each resource at /ogc/... and, pinned at a valid time, at /ogc/at/{datetime}/...
for prefix in ("", "/at/{at}"):
    router.add_api_route(
        prefix or "", landing, response_class=JSONText, summary="Landing page", responses=_PROBLEMS
    )
    router.add_api_route(
        prefix + "/conformance", conformance, response_class=JSONText, summary="Conformance"
    )
    router.add_api_route(
        prefix + "/collections",
        collections,
        response_class=JSONText,
        summary="The sources as collections",
    )
    router.add_api_route(
        prefix + "/collections/{source}",
        collection,
        response_class=JSONText,
        summary="One source",
        responses=_PROBLEMS,
    )
    router.add_api_route(
        prefix + "/collections/{source}/items",
        items,
        response_class=GeoJSONText,
        summary="A page of the layer's features",
        responses=_PROBLEMS,
    )
    router.add_api_route(
        prefix + "/collections/{source}/items/{key}",
        item,
        response_class=GeoJSONText,
        summary="One feature",
        responses=_PROBLEMS,
    )


# -- the documents ---------------------------------------------------------------------
def _page(src: fl.Source, asked: ogc_params.Items) -> fl.FeaturePage:
    when = asked.when
    return src.layer().page(
        valid=when.valid,
        since=when.since,
        known_at=when.known_at,
        bbox=asked.bbox,
        limit=asked.limit,
        offset=asked.offset,
    )


def _collection(led: fl.Ledger, name: str, base: str) -> dict[str, Any]:
    src = led.source(name)
    extent = src.layer().extent()
    url = base + f"/collections/{quote(name, safe='')}"
    crs = _crs_uri(extent.crs)
    out: dict[str, Any] = {
        "id": name,
        "title": name,
        "description": f"{name}: {extent.count} features in the current state"
        + ("" if extent.geo else " (no geometry: null geometries)"),
        "itemType": "feature",
        "links": [
            _link(url, "self", JSON, "This collection"),
            _link(url + "/items", "items", GEOJSON, "The features"),
        ],
        "extent": {"temporal": {"interval": [[_iso(extent.first), None]], "trs": GREGORIAN}},
        "crs": [crs],
        "storageCrs": crs,
    }
    if extent.bbox is not None:
        out["extent"]["spatial"] = {"bbox": [list(extent.bbox)], "crs": crs}
    return out


def _collection_text(page: fl.FeaturePage, links: list[dict[str, str]]) -> str:
    """The FeatureCollection's text: each feature's stored texts spliced in."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return (
        '{"type":"FeatureCollection","features":['
        + ",".join(f.geojson() for f in page.features)
        + '],"numberMatched":'
        + str(page.matched)
        + ',"numberReturned":'
        + str(page.returned)
        + ',"timeStamp":"'
        + stamp
        + '","links":'
        + json.dumps(links)
        + "}"
    )


def _page_links(url: str, request: Request, page: fl.FeaturePage) -> list[dict[str, str]]:
    """self, and next / prev: the same query with the offset moved by the limit."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "offset"]

    def at(offset: int) -> str:
        moved = [*query, ("offset", str(offset))] if offset else query
        return url + ("?" + urlencode(moved) if moved else "")

    links = [_link(str(request.url), "self", GEOJSON, "This document")]
    if page.more:
        links.append(_link(at(page.offset + page.limit), "next", GEOJSON, "The next page"))
    if page.offset > 0:
        links.append(
            _link(at(max(0, page.offset - page.limit)), "prev", GEOJSON, "The page before")
        )
    return links


def _crs_uri(crs: str | None) -> str:
    """The CRS's OGC URI: CRS84 for WGS 84 longitude/latitude (or none stated), an
    EPSG code's `http://www.opengis.net/def/crs/EPSG/0/N`, else the text as stated."""
    if crs is None or crs.strip().upper() in _WGS84:
        return ogc_params.CRS84
    code = crs.strip().upper()
    if code.startswith("EPSG:") and code[5:].isdigit():
        return f"http://www.opengis.net/def/crs/EPSG/0/{code[5:]}"
    return crs


def _crs_header(crs: str | None) -> dict[str, str]:
    return {"Content-Crs": f"<{_crs_uri(crs)}>"}


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
