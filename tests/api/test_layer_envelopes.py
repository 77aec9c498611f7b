"""A layer index's envelopes read off the geometry texts equal shapely's bounds of the
parsed geometries, for every kind of text: the ledger's compact GeoJSON of each type,
empty ones, a third coordinate, exponents, collections, spaces, nulls."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.api._source.envelopes import envelopes

coord = st.one_of(
    st.floats(-180, 180, allow_nan=False, allow_infinity=False),
    st.floats(-1e-6, 1e-6, allow_nan=False),  # written with an exponent
    st.integers(-(10**7), 10**7).map(float),
)
point2 = st.tuples(coord, coord)
point3 = st.tuples(coord, coord, coord)


def ring(points: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    return [*points, points[0]]


def shapes(pt: st.SearchStrategy[tuple[float, ...]]) -> st.SearchStrategy[object]:
    line = st.lists(pt, min_size=2, max_size=6)
    polygon = st.lists(pt, min_size=3, max_size=6).map(lambda p: shapely.Polygon(ring(p)))
    return st.one_of(
        pt.map(shapely.Point),
        line.map(shapely.LineString),
        polygon,
        st.lists(pt, min_size=1, max_size=4).map(shapely.MultiPoint),
        st.lists(line, min_size=1, max_size=3).map(shapely.MultiLineString),
        st.lists(polygon, min_size=1, max_size=3).map(shapely.MultiPolygon),
    )


def text_of(shape: object) -> str:
    return str(shapely.to_geojson(shape))


def spaced(text: str) -> str:
    """The same geometry as another writer might put it: spaces, other key order."""
    value = json.loads(text)
    return json.dumps({"coordinates": value["coordinates"], "type": value["type"]}, indent=1)


texts = st.one_of(
    shapes(point2).map(text_of),
    shapes(point3).map(text_of),
    shapes(point2).map(lambda s: spaced(text_of(s))),
    st.lists(shapes(point2), min_size=1, max_size=3).map(
        lambda parts: text_of(shapely.GeometryCollection(parts))
    ),
    st.sampled_from(
        [
            '{"type":"Polygon","coordinates":[]}',
            '{"type":"Point","coordinates":[]}',
            '{"type":"MultiPolygon","coordinates":[]}',
            '{"type":"GeometryCollection","geometries":[]}',
        ]
    ),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=40))
def test_envelopes_equal_shapely_bounds(column: list[str | None]) -> None:
    found = envelopes(pa.array(column, pa.string()))
    parsed = shapely.from_geojson(np.array(column, dtype=object), on_invalid="ignore")
    assert np.array_equal(found, shapely.bounds(parsed), equal_nan=True)


def test_a_sliced_column_and_a_large_string_column_read_their_own_rows() -> None:
    column = [text_of(shapely.Point(i, -i)) for i in range(10)]
    sliced = pa.array(column, pa.string()).slice(3, 4)
    assert envelopes(sliced).tolist() == [[i, -i, i, -i] for i in range(3, 7)]
    large = pa.array(column, pa.large_string()).slice(8)
    assert envelopes(large).tolist() == [[8, -8, 8, -8], [9, -9, 9, -9]]
