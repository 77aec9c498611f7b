"""`json_slices.split_features` (msgspec, the geometry skipped)
slices a GeoJSON page's features exactly as `split_page` (the stdlib's scanner) does --
same texts, same members, same type/id/properties -- or declines (None) where msgspec
does not take the page, which `split_page` then answers as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.sources.json_slices import split_features, split_page

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
PROPERTIES = st.dictionaries(st.text(min_size=1, max_size=5), SCALARS, max_size=4)
GEOMETRY = st.one_of(
    st.none(),
    st.builds(
        lambda pts: {"type": "LineString", "coordinates": pts},
        st.lists(st.tuples(st.floats(-180, 180), st.floats(-90, 90)), min_size=2, max_size=4),
    ),
)
FEATURE = st.builds(
    lambda fid, props, geom: {"type": "Feature", "id": fid, "geometry": geom, "properties": props},
    st.one_of(st.integers(0, 2**40), st.text(max_size=4)),
    PROPERTIES,
    GEOMETRY,
)


def page(features: list[Any], *, spaced: bool, ascii_only: bool, more: bool) -> str:
    body: dict[str, Any] = {"type": "FeatureCollection", "features": features}
    if more:
        body["properties"] = {"exceededTransferLimit": True}
    seps = (", ", ": ") if spaced else (",", ":")
    return json.dumps(body, separators=seps, ensure_ascii=ascii_only)


def assert_alike(text: str) -> None:
    fast = split_features(text.encode("utf-8"))
    slow = split_page(text)
    assert fast is not None
    assert fast[0] == slow[0]
    assert fast[1] is not None and slow[1] is not None
    assert [t for _v, t in fast[1]] == [t for _v, t in slow[1]]
    for (value, _t), (whole, _w) in zip(fast[1], slow[1], strict=True):
        assert value == {k: whole.get(k) for k in ("type", "id", "properties")}


@settings(max_examples=150, deadline=None)
@given(
    features=st.lists(FEATURE, max_size=6),
    spaced=st.booleans(),
    ascii_only=st.booleans(),
    more=st.booleans(),
)
def test_split_features_slices_as_split_page(
    features: list[Any], spaced: bool, ascii_only: bool, more: bool
) -> None:
    assert_alike(page(features, spaced=spaced, ascii_only=ascii_only, more=more))


def test_whitespace_around_features_is_not_part_of_their_text() -> None:
    assert_alike('{ "type" : "FeatureCollection" ,\t"features" : [ {"type": "Feature"} ,'
                 '  {"type":"Feature","id":2} ] , "x": [1, {"y": null}] }')  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        '{"features": [{"type": "Feature", "properties": {"a": NaN}}]}',  # not JSON
        '{"features": [{"type": "Feature",\n "id": 1}]}',  # a feature over two lines
        '{"features": null}',  # not an array
        '{"features": [5]}',  # not an object
        '{"features": [{"type": "Feature"}]',  # truncated
    ],
)
def test_pages_msgspec_does_not_take_are_left_to_split_page(text: str) -> None:
    assert split_features(text.encode()) is None


def test_no_features_member() -> None:
    assert split_features(b'{"error": {"code": 400}}') == ({"error": {"code": 400}}, None)
