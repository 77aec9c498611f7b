"""An ArcGIS layer dated by a field its features carry (`--published-from field:NAME`)
reads that field as ArcGIS writes a date -- epoch milliseconds (esriFieldTypeDate) --
instead of refusing "cannot parse publisher date '1780000000000'". A number no calendar
holds (1e20) and text that is no date are one line naming the source, the payload and
the field (before: neither source nor payload), exit 2, nothing applied. The fake
FeatureServer of tests/fakes/ on 127.0.0.1; both backends (`cli`)."""

from __future__ import annotations

import pytest

from fakes.arcgis import arcgis_fixture
from feedledger.demo.featureserver import FakeArcGIS
from helpers import Cli

_ = (arcgis_fixture,)  # the `arcgis` fixture

EDITED_MS = 1_780_000_000_000  # 2026-05-28T20:26:40Z


def _dated(cli: Cli, arcgis: FakeArcGIS, value: object) -> None:
    for feature in arcgis.features:
        feature["attributes"]["EDITED"] = value
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", arcgis.url,
        "--key", "PARCEL_ID", "--published-from", "field:EDITED")  # fmt: skip


@pytest.mark.parametrize("arcgis", ["11.1", "10.8"], indirect=True)
def test_an_esri_date_field_dates_the_layer(cli: Cli, arcgis: FakeArcGIS) -> None:
    _dated(cli, arcgis, EDITED_MS)
    assert "added 25" in cli("run", "zoning").stdout
    (payload,) = cli.json("archive", "list", "zoning")
    assert payload["published_at"] == "2026-05-28T20:26:40+00:00"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (1e20, "publisher date 1e+20 is not a date (epoch milliseconds"),
        ("yesterday", "cannot parse publisher date 'yesterday'"),
    ],
)
def test_a_field_date_that_is_no_date_names_source_payload_and_field(
    cli: Cli, arcgis: FakeArcGIS, value: object, problem: str
) -> None:
    _dated(cli, arcgis, value)
    result = cli("run", "zoning", expect=2)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"error: source 'zoning', payload {arcgis.url}: field 'EDITED': ")
    assert problem in line, line
    assert cli.json("runs", "zoning") == []
