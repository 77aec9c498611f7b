"""One suite over every destination kind (SQLite table, PostgreSQL table, GeoPackage
layer; a new kind joins by adding its place to `kind_place` and its reader to
sync/destination_kinds.py): the interruption exercise -- a rebuild killed (SIGKILL)
before a batch's write, after its write before its commit, after its commit before
the checkpoint, and before the rebuild's finish -- resumed with nothing missing,
repeated or stale; deletions and moves by the live route; reconcile with record-level
evidence. Everything a user sees is read back with a reader feedledger did not write,
and geometry compared as canonical WKB.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import shapely

from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli
from sync.destination_kinds import (
    Place,
    canonical,
    declare,
    features,
    parcels,
    remove_row,
    square,
    write_day,
)


def ingest(cli: Cli, tmp_path: Path, day: str, state: dict[str, tuple[str, Any]]) -> None:
    cli("ingest", "zoning", str(write_day(tmp_path, day, state)), "--published-at", day)


def assert_shows(place: Place, state: dict[str, tuple[str, Any]]) -> None:
    """The destination shows exactly the ledger's current state: the present parcels,
    their attributes, their geometry (canonical WKB equal); deleted ones absent."""
    got = features(place)
    assert sorted(got) == sorted(state)
    for key, (zone, geometry) in state.items():
        attrs, shape = got[key]
        assert attrs["zone"] == zone and attrs["parcel_id"] == key
        want = shapely.geometry.shape(geometry)
        assert canonical(shape) == canonical(want), key


# The ledger on SQLite only: what this exercise adds is each kind's own atomicity at
# every fault point; the ledger's part of it (the checkpoint, the outcome rows, on
# either backend) is the same code for every kind, interrupted on both backends by
# test_guard.py's `test_interrupted_rebuild_resumes_with_nothing_missing_repeated_or_stale`.
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "fault",
    [
        "before_destination_write:2",
        "destination_staged:2",
        "after_destination_write:2",
        "after_checkpoint:2",
        "before_destination_finish",
    ],
)
def test_an_interrupted_rebuild_resumes_with_nothing_missing_repeated_or_stale(
    cli: Cli, tmp_path: Path, kind_place: Place, fault: str
) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    day1 = parcels(25)
    ingest(cli, tmp_path, "2026-08-01", day1)
    declare(cli, kind_place, "zoning")
    cli("manifest", "create", "all", "--source", "zoning")
    killed = cli.proc("sync", "d", "--manifest", "all", "--batch", "10",
                      env={FAULT_ENV: f"{fault}:kill"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = cli.json("sync", "d", "--manifest", "all", "--batch", "10")
    assert done["status"] == "finished" and done["checkpoint"]["batches"] >= 3
    assert sum(done["outcomes"].values()) == 25  # a retry is not counted twice
    assert done["outcomes"]["accepted"] + done["outcomes"]["already_current"] == 25
    report = cli.json("reconcile", "d", "--manifest", "all")
    assert report["complete"] is True, report
    assert_shows(kind_place, day1)
    # then the live route: a move, a deletion, a new parcel
    day2 = {k: v for k, v in day1.items() if k != "P03"}
    day2["P01"] = ("R9", square(40, 40))
    day2["P30"] = ("R1", square(50, 50))
    ingest(cli, tmp_path, "2026-08-02", day2)
    live = cli.json("sync", "d", "--live", "--once")
    assert live["outcomes"]["accepted"] == 3, live
    assert_shows(kind_place, day2)
    cli("manifest", "create", "now", "--source", "zoning")
    again = cli.json("sync", "d", "--manifest", "now")
    assert again["outcomes"]["already_current"] == 25, again  # nothing counted twice
    assert cli.json("reconcile", "d", "--manifest", "now")["complete"] is True
    assert_shows(kind_place, day2)


def test_a_kill_during_the_live_route_repeats_the_batch_harmlessly(
    cli: Cli, tmp_path: Path, kind_place: Place
) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", parcels(6))
    declare(cli, kind_place, "zoning")
    day2 = {**parcels(6), "P02": ("R7", square(9, 9))}
    del day2["P04"]
    ingest(cli, tmp_path, "2026-08-02", day2)
    killed = cli.proc("sync", "d", "--live", "--once", env={FAULT_ENV: "destination_staged:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    live = cli.json("sync", "d", "--live", "--once")
    assert live["outcomes"]["accepted"] == 2, live
    got = features(kind_place)
    assert sorted(got) == ["P02"]  # the live route writes what changed; a rebuild the rest
    assert canonical(got["P02"][1]) == canonical(shapely.geometry.shape(square(9, 9)))


def incomplete(cli: Cli, manifest: str) -> Any:
    """reconcile's report of an incomplete destination (exit 1)."""
    report = json.loads(cli("reconcile", "d", "--manifest", manifest, "--json", expect=1).stdout)
    assert report["complete"] is False
    return report


def test_reconcile_names_each_record_the_destination_lost_or_holds_stale(
    cli: Cli, tmp_path: Path, kind_place: Place
) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    ingest(cli, tmp_path, "2026-08-01", parcels(12))
    declare(cli, kind_place, "zoning")
    cli("manifest", "create", "all", "--source", "zoning")
    cli.json("sync", "d", "--manifest", "all")
    assert cli.json("reconcile", "d", "--manifest", "all")["complete"] is True
    remove_row(kind_place, "P05")
    report = incomplete(cli, "all")
    assert [m["key"] for m in report["missing"]] == [["P05"]]
    assert report["missing"][0]["expected_generation"] == "M-1"
    # the ledger moves on while the live route is paused: the destination is stale
    day2 = {**parcels(12), "P06": ("R5", square(70, 70))}
    ingest(cli, tmp_path, "2026-08-02", day2)
    cli("manifest", "create", "later", "--source", "zoning")
    stale = incomplete(cli, "later")
    assert [s["key"] for s in stale["stale"]] == [["P06"]]
    assert stale["stale"][0]["found_revision"] < stale["stale"][0]["expected_revision"]
    # a rebuild repairs both
    cli.json("sync", "d", "--manifest", "later")
    assert cli.json("reconcile", "d", "--manifest", "later")["complete"] is True
    assert_shows(kind_place, day2)
