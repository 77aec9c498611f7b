"""A portal's publisher date that is stated but is no date -- an ArcGIS layer's
`editingInfo.dataLastEditDate` or a Socrata view's `rowsUpdatedAt` written as text,
`true` or NaN; a CKAN resource's `last_modified` written as a number -- is refused
quoting the value as the server wrote it ("yesterday", NaN, 1e+20), never reported as
missing ("the layer has no editingInfo.dataLastEditDate") and never passed over for
another date. One line, exit 4, nothing archived or applied. The servers are the fakes
of tests/fakes/ on 127.0.0.1; both backends (`cli`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.arcgis import arcgis_fixture
from fakes.ckan import FakeCkan, ckan_fixture
from fakes.socrata import FakeSocrata, socrata_fixture
from feedledger.demo.featureserver import FakeArcGIS
from feedledger.demo.local_server import Reply, Request
from helpers import Cli

_ = (arcgis_fixture, socrata_fixture, ckan_fixture)  # the portal fixtures


def _one_line(result: Any) -> str:
    message: str = result.stderr.strip()
    assert "Traceback" not in message and len(message.splitlines()) == 1, message
    return message


def _nothing_kept(cli: Cli, source: str) -> None:
    assert cli.json("runs", source) == []
    root = cli.ws.archive_root
    assert not [p for p in root.rglob("*") if p.is_file()], "something was archived"


@pytest.mark.parametrize(
    ("value", "shown"), [("yesterday", '"yesterday"'), (True, "true"), (float("nan"), "NaN")]
)
def test_an_arcgis_edit_date_that_is_no_number_is_quoted(
    cli: Cli, arcgis: FakeArcGIS, value: object, shown: str
) -> None:
    arcgis.edit_date = value  # type: ignore[assignment]  # lastEditDate the same
    assert arcgis.server is not None
    route = arcgis.server.route

    def later_last_edit(request: Request) -> Reply:
        reply = route(request)
        if request.path.endswith("/FeatureServer/0"):  # a number beside it: not taken
            meta = json.loads(reply.body)
            meta["editingInfo"]["lastEditDate"] = 1_780_000_000_000
            reply = Reply(200, json.dumps(meta).encode())
        return reply

    arcgis.server.route = later_last_edit
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", arcgis.url,
        "--key", "PARCEL_ID")  # fmt: skip
    message = _one_line(cli("run", "zoning", expect=4))
    assert f"the layer's editingInfo.dataLastEditDate {shown} is not a date" in message, message
    assert "nothing was archived" in message
    _nothing_kept(cli, "zoning")


@pytest.mark.parametrize(("value", "shown"), [("yesterday", '"yesterday"'), (float("nan"), "NaN")])
def test_a_socrata_date_that_is_no_number_is_quoted(
    cli: Cli, socrata: FakeSocrata, value: object, shown: str
) -> None:
    socrata.rows_updated_at = value  # type: ignore[assignment]
    cli("source", "add", "parcels", "--connector", "socrata", "--format", "json",
        "--fetch", socrata.url, "--key", "parcel_id")  # fmt: skip
    message = _one_line(cli("run", "parcels", expect=4))
    assert f"the view's rowsUpdatedAt {shown} is not a date" in message, message
    _nothing_kept(cli, "parcels")


@pytest.mark.parametrize(("value", "shown"), [(1e20, "1e+20"), (True, "true")])
def test_a_ckan_date_that_is_no_text_is_quoted(
    cli: Cli, ckan: FakeCkan, value: object, shown: str
) -> None:
    ckan.resources = {"parcels.csv": ("CSV", b"parcel_id,z\n1,R-1\n", value)}  # type: ignore[dict-item]
    cli("source", "add", "parcels", "--connector", "ckan", "--format", "csv", "--fetch",
        ckan.url, "--resource", "parcels.csv", "--key", "parcel_id")  # fmt: skip
    message = _one_line(cli("run", "parcels", expect=4))
    assert f"the resource's last_modified {shown} is not a date" in message, message
    _nothing_kept(cli, "parcels")
