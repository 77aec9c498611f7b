"""The connector's pages asked ahead (sources/arcgis_query.py
`arcgis_ahead.PagesAhead`): the worker asks for the next page itself as soon as one is in (a few
waiting at most), so the pages follow one another as in a plain download; nothing past
the count is asked, and a server whose pages are shorter than the size asked (its
real cap below the stated maxRecordCount) costs at most one wasted request a page."""

from __future__ import annotations

import json

from feedledger.demo.featureserver import FakeArcGIS, parcels
from feedledger.demo.local_server import Reply, Request, serve
from feedledger.sources.arcgis import fetch_layer


def layer_ids(data: bytes | None) -> list[int]:
    assert data is not None
    return [json.loads(line)["properties"]["OBJECTID"] for line in data.decode().splitlines()]


def test_whole_pages_ask_nothing_past_the_count() -> None:
    fake = FakeArcGIS(flavour="11.1", features=parcels(50), max_record_count=10)
    with serve(fake.route) as server:
        fake.server = server
        layer = fetch_layer(fake.url)
    assert layer_ids(layer.data) == list(range(1, 51))
    offsets = [r.query["resultOffset"] for r in fake.feature_requests]
    assert offsets == ["0", "10", "20", "30", "40"]  # each once, in order, none past


def test_short_pages_cost_at_most_one_wasted_request_each() -> None:
    fake = FakeArcGIS(flavour="11.1", features=parcels(40), max_record_count=4)

    def stated_ten(request: Request) -> Reply:  # states 10, answers pages of 4
        reply = fake.route(request)
        if request.path == "/arcgis/rest/services/Zoning/FeatureServer/0":
            meta = json.loads(reply.body)
            meta["maxRecordCount"] = 10
            return Reply(reply.status, json.dumps(meta).encode(), reply.content_type)
        return reply

    with serve(stated_ten) as server:
        fake.server = server
        layer = fetch_layer(fake.url)
    assert layer_ids(layer.data) == list(range(1, 41))
    pages_needed = 10
    assert pages_needed <= len(fake.feature_requests) <= 2 * pages_needed + 2
