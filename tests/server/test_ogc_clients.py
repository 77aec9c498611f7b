"""Clients no one here wrote read `feedledger serve`'s OGC API - Features: GDAL's OAPIF
driver (through pyogrio's `read_arrow`: pyogrio's wheel carries GDAL) and OWSLib's
`Features`. Each reads every feature of the layer page by page through the server's
`next` links, filters by `bbox` and by `datetime`, and gets what the publications said;
the server is the real `feedledger serve` process on a free port. SQLite and
PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyogrio
import pytest
import shapely
from owslib.ogcapi.features import Features

import feedledger as fl
from browser_support import Served, serve
from feedledger.config import Workspace
from ogc_layers import DAYS, build, in_bbox

BOX = (-104.985, 40.005, -104.955, 40.025)


@pytest.fixture
def served(workspace: Workspace) -> Iterator[Served]:
    with fl.open(workspace.config_path) as led:
        build(led)
    with serve(workspace.config_path, None, {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}) as s:
        yield s


def gdal(url: str, **options: Any) -> dict[str, tuple[dict[str, Any], Any]]:
    """The layer as GDAL's OAPIF driver reads it: key -> (properties, shape)."""
    meta, table = pyogrio.read_arrow(url, **options)
    rows = table.to_pylist()
    geom = meta["geometry_name"] or "wkb_geometry"
    return {
        r["parcel"]: (
            {k: r[k] for k in ("parcel", "zoning", "floors", "area")},
            shapely.from_wkb(r[geom]) if r[geom] is not None else None,
        )
        for r in rows
    }


def same(read: dict[str, tuple[dict[str, Any], Any]], want: dict[str, Any]) -> None:
    assert sorted(read) == sorted(want)
    for key, (props, shape) in read.items():
        p, g = want[key]
        assert props == p
        if g is None:
            assert shape is None
        else:
            assert shapely.equals_exact(shape, shapely.geometry.shape(g), tolerance=0)


def test_gdal_reads_every_feature_a_page_at_a_time(served: Served) -> None:
    url = f"OAPIF:{served.url}/ogc"
    assert {str(x[0]) for x in pyogrio.list_layers(url)} == {"parcels", "owners"}
    # pages of 7: GDAL follows the server's `next` links to the end (39 features)
    same(gdal(url, layer="parcels", PAGE_SIZE=7), DAYS[2])


def test_gdal_filters_by_bbox_and_datetime(served: Served) -> None:
    url = f"OAPIF:{served.url}/ogc"
    want = {k: v for k, v in DAYS[2].items() if in_bbox(v[1], BOX)}
    same(gdal(url, layer="parcels", bbox=BOX, PAGE_SIZE=3), want)
    # GDAL sends no `datetime`: the API pinned at a valid time is the layer published then
    dated = f"OAPIF:{served.url}/ogc/at/2026-08-02"
    same(gdal(dated, layer="parcels", PAGE_SIZE=10), DAYS[1])
    same(
        gdal(dated, layer="parcels", bbox=BOX),
        {k: v for k, v in DAYS[1].items() if in_bbox(v[1], BOX)},
    )


def test_owslib_pages_through_next_and_filters(served: Served) -> None:
    api = Features(f"{served.url}/ogc")
    assert set(api.feature_collections()) >= {"parcels", "owners"}
    assert api.collection("parcels")["extent"]["spatial"]["bbox"][0][:2] == [-105.0, 40.0]

    def walk(**asked: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = api.collection_items("parcels", limit=5, offset=offset, **asked)
            found += page["features"]
            nxt = [link["href"] for link in page["links"] if link["rel"] == "next"]
            if not nxt:
                assert len(found) == page["numberMatched"]
                return found
            offset = int(parse_qs(urlsplit(nxt[0]).query)["offset"][0])

    def by_key(features: list[dict[str, Any]]) -> dict[str, Any]:
        return {f["id"]: (f["properties"], f["geometry"]) for f in features}

    assert by_key(walk()) == DAYS[2]
    want = {k: v for k, v in DAYS[2].items() if in_bbox(v[1], BOX)}
    assert by_key(walk(bbox=list(BOX))) == want
    assert by_key(walk(datetime_="2026-08-02")) == DAYS[1]
    one = api.collection_item("parcels", "P010")
    assert one["properties"]["floors"] == 9
    owners = api.collection_items("owners", limit=100)
    assert owners["numberMatched"] == 12 and all(f["geometry"] is None for f in owners["features"])
