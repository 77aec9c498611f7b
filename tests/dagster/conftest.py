"""Fixtures of the Dagster integration's tests: a workspace on each backend with the
source `larimer` fetched from a folder, the resource over it, and an ephemeral
Dagster instance (nothing written outside the test's tmp folder)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

pytest.importorskip("dagster")  # the `dagster` extra (in `dev`)

import dagster as dg

import feedledger as fl
from feedledger.config import Workspace
from feedledger.dagster import FeedledgerResource

DASHBOARD = "http://127.0.0.1:8765"
TZ = "America/Denver"


Publish = Callable[..., Path]


def parcels(zoning: str, *others: str) -> bytes:
    """A county's export: parcel 1 with `zoning`, then parcels 2.. as `others`."""
    rows = [f"1,{zoning}"] + [f"{i},{z}" for i, z in enumerate(others, start=2)]
    return ("parcel_id,zoning\n" + "\n".join(rows) + "\n").encode()


@pytest.fixture
def publish(feed: Path) -> Publish:
    """`publish(day, zoning, *others)`: the county puts a dated export in its folder."""

    def put(day: date, zoning: str, *others: str) -> Path:
        path = feed / f"larimer_{day.isoformat()}.csv"
        path.write_bytes(parcels(zoning, *others))
        return path

    return put


@pytest.fixture
def today() -> date:
    """Today in the source's timezone: a live run applies a publication that is due now
    (an older one, with days expected since, is caught up as a backfill)."""
    return datetime.now(ZoneInfo(TZ)).date()


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    path = tmp_path / "feed"
    path.mkdir()
    return path


@pytest.fixture
def ledger(workspace: Workspace, feed: Path) -> Iterator[fl.Ledger]:
    with fl.open(workspace.config_path) as led:
        led.add_source(
            "larimer", key=["parcel_id"], timezone=TZ, cadence="daily",
            fetch=str(feed),
        )  # fmt: skip
        yield led


@pytest.fixture
def resource(workspace: Workspace, ledger: fl.Ledger) -> FeedledgerResource:
    return FeedledgerResource(
        workspace=str(workspace.config_path), dashboard_url=DASHBOARD, backfill_fetch=False
    )


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst
