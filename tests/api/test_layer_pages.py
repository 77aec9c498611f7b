"""`Source.layer()`: a source read as a layer a page at a time (what `serve`'s OGC API -
Features answers), on SQLite and PostgreSQL. Every page of every state adds up to the
state as the test's own record of the publications says it was; the bbox, interval
and offset choices agree with a brute-force filter written here (and, as a property,
for any bbox and page); a valid time inside a gap or before the first observation is
refused, never answered with the nearest state; a payload applied meanwhile is seen
by the next page (the index is built again)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import feedledger as fl
from feedledger.api._source import feature_index
from feedledger.config import Workspace
from ogc_layers import DAYS, PUBLISHED, build, collection, in_bbox


@pytest.fixture
def led(workspace: Workspace) -> Iterator[fl.Ledger]:
    with fl.open(workspace.config_path) as opened:
        build(opened)
        yield opened


def everything(layer: fl.Layer, limit: int = 7, **asked: Any) -> tuple[list[fl.Feature], int]:
    """Every feature of the pages, walked `limit` at a time; and numberMatched."""
    found: list[fl.Feature] = []
    offset = 0
    while True:
        page = layer.page(limit=limit, offset=offset, **asked)
        assert page.returned <= limit
        found += page.features
        if not page.more:
            return found, page.matched
        offset += limit


def end_of(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC) - timedelta(
        microseconds=1
    )


@pytest.mark.parametrize("day", [0, 1, 2])
def test_the_pages_of_a_state_are_the_layer_as_published_then(led: fl.Ledger, day: int) -> None:
    layer = led.source("parcels").layer()
    found, matched = everything(layer, valid=end_of(PUBLISHED[day]))
    want = DAYS[day]
    assert matched == len(want)
    assert [f.id for f in found] == sorted(want)  # key order, no repeats
    for f in found:
        props, geom = want[f.id]
        assert f.properties == props
        assert f.geometry == geom
        # the fields in the source's order, as published
        assert list(f.properties) == list(props)


def test_the_current_layer_is_the_last_publication(led: fl.Ledger) -> None:
    found, _matched = everything(led.source("parcels").layer())
    assert {f.id for f in found} == set(DAYS[2])
    assert [f.valid_from for f in found if f.id == "P010"] == [datetime(2026, 8, 5, tzinfo=UTC)]


def test_bbox_keeps_the_features_whose_envelope_meets_it(led: fl.Ledger) -> None:
    layer = led.source("parcels").layer()
    box = (-104.985, 40.005, -104.955, 40.025)
    found, matched = everything(layer, bbox=box, limit=3)
    want = sorted(k for k, (_p, g) in DAYS[2].items() if in_bbox(g, box))
    assert 0 < len(want) < len(DAYS[2])
    assert [f.id for f in found] == want and matched == len(want)
    # the feature without a geometry is in the layer, and in no bbox
    assert layer.feature("P042").geometry is None
    everywhere = (-180.0, -90.0, 180.0, 90.0)
    assert "P042" not in {f.id for f in everything(layer, bbox=everywhere, limit=50)[0]}


def test_an_interval_keeps_what_was_published_in_it_and_stands_at_its_end(led: fl.Ledger) -> None:
    layer = led.source("parcels").layer()
    since = datetime(2026, 8, 2, tzinfo=UTC)
    found, _ = everything(layer, since=since, valid=end_of(date(2026, 8, 2)))
    changed = {k for k, v in DAYS[1].items() if DAYS[0].get(k) != v}
    assert {f.id for f in found} == changed
    assert {f.id for f in everything(layer, since=since)[0]} == {
        k for k, v in DAYS[2].items() if DAYS[0].get(k) != v
    }


def test_a_valid_time_not_observed_is_refused_never_the_nearest_state(led: fl.Ledger) -> None:
    layer = led.source("parcels").layer()
    with pytest.raises(fl.InGap, match="portal down") as caught:
        layer.page(valid=datetime(2026, 8, 3, 12, tzinfo=UTC))
    assert caught.value.gap.last_observed_at == datetime(2026, 8, 2, tzinfo=UTC)
    with pytest.raises(fl.InGap):
        layer.feature("P001", valid=datetime(2026, 8, 4, tzinfo=UTC))
    with pytest.raises(fl.NotObserved, match="first observation"):
        layer.page(valid=datetime(2026, 7, 31, tzinfo=UTC))
    with pytest.raises(fl.NotFoundError, match="P031"):
        layer.feature("P031")  # deleted on day 2


def test_known_at_answers_the_layer_as_it_was_believed_then(led: fl.Ledger) -> None:
    src = led.source("parcels")
    day2 = src.history("P040")[0].recorded_at
    found, _ = everything(src.layer(), known_at=day2)
    assert {f.id for f in found} == set(DAYS[1])


def test_a_payload_applied_meanwhile_is_seen_by_the_next_page(led: fl.Ledger) -> None:
    src = led.source("parcels")
    layer = src.layer()
    before = feature_index.CACHE.builds
    layer.page(limit=5)
    layer.page(limit=5, offset=5)
    assert feature_index.CACHE.builds == before + 1  # one index for the state
    day4 = {k: v for k, v in DAYS[2].items() if k != "P000"}
    src.ingest(collection(day4), published_at=date(2026, 8, 6), name="parcels-4.geojson")
    page = layer.page(limit=100)
    assert "P000" not in {f.id for f in page.features} and page.matched == len(day4)
    assert feature_index.CACHE.builds == before + 2


def test_a_source_without_geometry_is_a_layer_of_null_geometries(led: fl.Ledger) -> None:
    layer = led.source("owners").layer()
    found, matched = everything(layer, limit=5)
    assert matched == 12 and all(f.geometry is None for f in found)
    assert found[0].to_json()["properties"] == {
        "owner_id": "O0",
        "name": "name 0",
        "city": "Loveland",
    }
    assert layer.extent().bbox is None
    assert layer.page(bbox=(-180.0, -90.0, 180.0, 90.0)).matched == 0


def test_the_extent_is_the_current_layers(led: fl.Ledger) -> None:
    extent = led.source("parcels").layer().extent()
    assert extent.count == len(DAYS[2]) and extent.crs == "EPSG:4326" and extent.geo
    assert extent.first == datetime(2026, 8, 1, tzinfo=UTC)
    assert extent.last == datetime(2026, 8, 5, tzinfo=UTC)
    assert extent.bbox is not None
    xs = [c[0] for _p, g in DAYS[2].values() if g for c in g["coordinates"][0]]
    ys = [c[1] for _p, g in DAYS[2].values() if g for c in g["coordinates"][0]]
    assert extent.bbox == (min(xs), min(ys), max(xs), max(ys))


def test_bad_pages_are_refused(led: fl.Ledger) -> None:
    layer = led.source("parcels").layer()
    for asked in ({"limit": 0}, {"limit": 10_001}, {"offset": -1}):
        with pytest.raises(fl.ConfigError):
            layer.page(**asked)
    with pytest.raises(fl.ConfigError, match="lower corner"):
        layer.page(bbox=(0.0, 1.0, 1.0, 0.0))


boxes = st.tuples(
    st.floats(-105.02, -104.9),
    st.floats(39.99, 40.06),
    st.floats(0.0, 0.08),
    st.floats(0.0, 0.06),
).map(lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3]))


@given(box=boxes, offset=st.integers(0, 40), limit=st.integers(1, 12))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_bbox_and_page_is_the_brute_force_slice(
    led: fl.Ledger, box: tuple[float, float, float, float], offset: int, limit: int
) -> None:
    page = led.source("parcels").layer().page(bbox=box, offset=offset, limit=limit)
    want = sorted(k for k, (_p, g) in DAYS[2].items() if in_bbox(g, box))
    assert page.matched == len(want)
    assert [f.id for f in page.features] == want[offset : offset + limit]


def test_concurrent_first_pages_build_the_index_once(led: fl.Ledger) -> None:
    from concurrent.futures import ThreadPoolExecutor

    layer = led.source("owners").layer()
    feature_index.CACHE.clear()
    before = feature_index.CACHE.builds
    with ThreadPoolExecutor(4) as pool:
        pages = list(pool.map(functools.partial(lambda o: layer.page(offset=o, limit=3)), range(4)))
    assert [p.matched for p in pages] == [12] * 4
    assert feature_index.CACHE.builds == before + 1


@pytest.mark.parametrize("look", ["page", "extent"])
def test_a_payload_committed_between_the_token_and_the_layout_builds_the_index_once(
    led: fl.Ledger, monkeypatch: pytest.MonkeyPatch, look: str
) -> None:
    """A payload that commits after a look read the state token but before it read the
    layout must not file the new state under the old token: the index of the new state
    is built once, not once under each token."""
    from feedledger.api import features

    src = led.source("parcels")
    layer = src.layer()
    layer.page(limit=5)  # the current state's index, built
    day4 = {k: v for k, v in DAYS[2].items() if k != "P000"}
    landed: list[bool] = []
    real_token = features.Layer._token

    def token_then_payload(self: features.Layer) -> Any:
        token = real_token(self)
        if not landed:  # the first read of a look: then the payload commits
            landed.append(True)
            src.ingest(collection(day4), published_at=date(2026, 8, 6), name="p-4.geojson")
        return token

    monkeypatch.setattr(features.Layer, "_token", token_then_payload)
    before = feature_index.CACHE.builds
    if look == "page":
        page = layer.page(limit=100)
        assert "P000" not in {f.id for f in page.features} and page.matched == len(day4)
    else:
        assert layer.extent().count == len(day4)
    assert landed and feature_index.CACHE.builds == before + 1
    layer.page(limit=100)  # the next look finds it
    assert feature_index.CACHE.builds == before + 1
