"""A layer read a page at a time while it downloads
(formats/spatial/geo_pages.py) gives exactly the Observations of reading the archived GeoJSON
sequence whole (what replay and `archive reindex` do) -- same fields, key and attribute
texts, content hashes, geometry texts and hashes -- or declines (None), and the run
then reads the payload whole. Checked with hypothesis over awkward pages (nulls, ints
beside reals, big integers, booleans, strings, a field missing on a page, null and
invalid geometries) and end to end through the fake FeatureServer, with a replay."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes.arcgis import arcgis_fixture
from feedledger.demo.featureserver import parcels, running
from feedledger.formats.observations import Observations
from feedledger.formats.readers import read_observations
from feedledger.formats.spatial.geo_pages import PageReader, page_reader
from feedledger.model.source import SourceConfig
from helpers import Cli

_ = arcgis_fixture

URL = "https://gis.example.org/arcgis/rest/services/Zoning/FeatureServer/0"
SRC = SourceConfig(name="zoning", key=("PARCEL_ID",), format="geojsonseq",
                   connector="arcgis", fetch=URL)  # fmt: skip


def square(i: int) -> dict[str, Any]:
    x, y = -122.5 + i * 1e-4, 37.5
    ring = [[x, y], [x + 5e-5, y], [x + 5e-5, y + 5e-5], [x, y + 5e-5], [x, y]]
    return {"type": "Polygon", "coordinates": [ring]}


BOWTIE = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}


def line(i: int, props: dict[str, Any], geometry: Any = "square") -> str:
    shape = square(i) if geometry == "square" else geometry
    feature = {"type": "Feature", "id": i, "geometry": shape,
               "properties": {"OBJECTID": i, "PARCEL_ID": f"P{i:05d}", **props}}  # fmt: skip
    return json.dumps(feature)


def paged(
    pages: list[list[str]], src: SourceConfig = SRC, *, geometry_text: bool = True
) -> Observations | None:
    with PageReader(src, geometry_text=geometry_text) as reader:
        for page in pages:
            reader.page(page)
        return reader.observations("layer")


def whole(pages: list[list[str]], src: SourceConfig = SRC) -> Observations:
    data = "".join(f"{text}\n" for page in pages for text in page).encode()
    return read_observations(data, src, label="layer")


def assert_same(got: Observations | None, want: Observations) -> None:
    assert got is not None
    assert got.frame.equals(want.frame)
    assert got.raw.equals(want.raw)
    assert got.fields == want.fields
    assert got.attr_columns == want.attr_columns
    assert got.literal_columns == want.literal_columns
    assert got.published_values == want.published_values
    assert (got.crs, got.invalid_geometries) == (want.crs, want.invalid_geometries)
    every = pl.Series(range(want.height), dtype=pl.UInt32)
    assert got.attributes(every).equals(want.attributes(every))
    assert got.geometries(every).equals(want.geometries(every))


@pytest.mark.parametrize("geometry_text", [True, False])
def test_pages_of_one_typing_equal_the_whole_read(geometry_text: bool) -> None:
    pages = [[line(i + p * 4, {"ZONING": f"R-{i}", "AREA": 1.5 * i}) for i in range(4)]
             for p in range(3)]  # fmt: skip
    got = paged(pages, geometry_text=geometry_text)
    assert got is not None and got.geometry is not None
    assert ("geometry" in got.geometry.columns) is geometry_text
    assert_same(got, whole(pages))


@pytest.mark.parametrize(
    "values",
    [
        [[1, 2], [None, None], [2.5, 3.0]],  # ints, a page of nulls, reals
        [[1, None], [2**40, 5]],  # int32 then int64
        [[None, None], [None, None]],  # null throughout
        [[1, 2], [3.5, None], [2**40, None]],  # int32, real, int64
        [["2024-01-02", None], ["2024-01-03", "x"]],  # date-looking strings
    ],
)
def test_pages_typed_apart_are_unified_as_the_whole_read(values: list[list[Any]]) -> None:
    pages, i = [], 1
    for page in values:
        pages.append([line(i + k, {"AREA": v}) for k, v in enumerate(page)])
        i += len(page)
    assert_same(paged(pages), whole(pages))


@pytest.mark.parametrize(
    "pages",
    [
        [[line(1, {"A": 1})], [line(2, {})]],  # a field missing on a page
        [[line(1, {"A": 1, "B": 2})], [line(2, {"B": 2, "A": 1})]],  # another order
        [[line(1, {"A": True})], [line(2, {"A": 3})]],  # booleans beside integers
        [[line(1, {"A": "x"})], [line(2, {"A": 3})]],  # a string beside a number
        [[line(1, {"A": [1]})], [line(2, {"A": [1.5]})]],  # lists of other items
        [[line(1, {})], ["not json"]],  # a page GDAL cannot read
    ],
)
def test_pages_typed_otherwise_decline(pages: list[list[str]]) -> None:
    assert paged(pages) is None


@pytest.mark.parametrize("geometry_text", [True, False])
def test_null_and_invalid_geometries_counted_alike(geometry_text: bool) -> None:
    # a page led by a feature without geometry, then one with (polars refuses to cast
    # such an object array to String: the texts go through a list)
    pages = [[line(1, {}), line(2, {}, None)], [line(3, {}, None), line(4, {}, BOWTIE)]]
    got = paged(pages, geometry_text=geometry_text)
    assert got is not None and got.invalid_geometries == 1
    want = whole(pages)
    assert_same(got, want)
    led_by_none = pl.Series([1, 3], dtype=pl.UInt32)  # the texts of a daily's few rows
    assert want.geometries(led_by_none)["geometry"].to_list()[0] is None
    assert got.geometries(led_by_none).equals(want.geometries(led_by_none))


def test_a_field_of_numbers_and_strings_reads_as_stated() -> None:
    # GDAL sub-types such a field JSON and writes its string values bare (`x`, ``)
    pages = [[line(1, {"A": 0}), line(2, {"A": "x"}), line(3, {"A": ""})]]
    read = whole(pages)
    texts = read.attributes(pl.Series(range(3), dtype=pl.UInt32)).to_list()
    assert [json.loads(t)["A"] for t in texts] == [0, "x", ""]
    assert_same(paged(pages), read)


def test_restart_drops_the_pages_read() -> None:
    first = [[line(1, {"A": "x"})]]
    pages = [[line(1, {"A": 1}), line(2, {"A": 2})]]
    with PageReader(SRC) as reader:
        reader.page(first[0])
        reader.restart()
        reader.page(pages[0])
        assert_same(reader.observations("layer"), whole(pages))


def test_only_an_arcgis_sequence_in_utf8_is_read_by_pages() -> None:
    assert page_reader(SRC) is not None
    assert page_reader(SRC.model_copy(update={"encoding": "latin-1"})) is None
    plain = SourceConfig(name="zoning", key=("PARCEL_ID",), format="geojsonseq")
    assert page_reader(plain) is None


VALUES = st.one_of(
    st.none(),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=4),
    st.sampled_from(["2024-01-02", "2024-01-02T03:04:05Z", "12", ""]),
)
MISSING = object()
GEOMETRIES = st.sampled_from(["square", None, BOWTIE])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layer=st.lists(
        st.tuples(
            st.fixed_dictionaries({"A": st.one_of(VALUES, st.just(MISSING)), "B": VALUES}),
            GEOMETRIES,
        ),
        min_size=1,
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 11), max_size=4),
)
def test_pages_equal_the_whole_read_or_decline(
    layer: list[tuple[dict[str, Any], Any]], cuts: list[int]
) -> None:
    lines = [
        line(i + 1, {k: v for k, v in props.items() if v is not MISSING}, geometry)
        for i, (props, geometry) in enumerate(layer)
    ]
    bounds = sorted({0, len(lines), *(c for c in cuts if c < len(lines))})
    pages = [lines[a:b] for a, b in pairwise(bounds)]
    got = paged(pages)
    if got is not None:
        assert_same(got, whole(pages))


# -- end to end: `run` reads the pages, replay reads the archive --------------------


def _awkward(n: int) -> list[dict[str, Any]]:
    """Parcels whose AREA is an integer on some pages, a real or null on others, and
    whose NOTE is null throughout some pages (pages of 3)."""
    features = parcels(n)
    for i, f in enumerate(features):
        page = i // 3
        f["attributes"]["AREA"] = [i * 10, i + 0.25, None][page % 3]
        f["attributes"]["NOTE"] = None if page % 2 else f"note {i}"
    return features


def test_run_reads_pages_and_replay_gives_the_same_versions(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole_reads: list[str] = []
    import feedledger.formats.spatial.geo_reader as geo_reader  # (readers imports it on need)

    real = geo_reader.read_geo

    def counted(data: bytes, src: SourceConfig, label: str) -> Observations:
        whole_reads.append(label)
        return real(data, src, label)

    monkeypatch.setattr(geo_reader, "read_geo", counted)
    with running("11.1") as fake:
        fake.features, fake.max_record_count = _awkward(14), 3
        cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", fake.url,
            "--key", "PARCEL_ID")  # fmt: skip
        cli("run", "zoning")
        assert whole_reads == []  # the pages were read as they came
        fake.features[4]["attributes"]["AREA"] = "unknown"  # a string beside numbers
        fake.republish()
        cli("run", "zoning")
        assert len(whole_reads) == 1  # typed otherwise: read whole
    keys = [f"P{i:07d}" for i in range(1, 15)]
    before = {k: cli.json("history", "zoning", k) for k in keys}
    replayed = cli.json("replay", "zoning", "--from", "2026-05-28")
    assert replayed["retracted_versions"] > 0
    for key in keys:
        again = cli.json("history", "zoning", key)
        assert [(v["attributes"], v.get("geometry")) for v in again] == [
            (v["attributes"], v.get("geometry")) for v in before[key]
        ]
