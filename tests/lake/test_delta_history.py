"""`feedledger export delta`: the Delta table read back by delta-rs and polars equals
the ledger's own history, after a first export and after incremental ones (new
versions, a retraction, a backfill between exported versions, a new year's partition),
on SQLite and PostgreSQL; time travel to each Delta version equals `asof --known-at`
of that version's position."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path

import polars as pl

from helpers import Cli
from lake.delta_scenario import (
    HEADER,
    SRC,
    assert_equals_history,
    declare,
    export,
    ingest,
    iso_us,
    position,
    table_rows,
)


def test_first_and_incremental_exports_equal_history(cli: Cli, tmp_path: Path) -> None:
    uri = str(tmp_path / "lake" / "parcels")
    declare(cli)
    for day in ("2025-08-01", "2025-08-02", "2025-08-04"):
        ingest(cli, tmp_path, day)
    first = export(cli, uri)
    assert first["committed"] and first["delta_version"] == 0
    # 08-01: 3 added; 08-02: parcel 1 changed; 08-04: 1 and 2 changed, 3 deleted, 4 added
    assert first["sources"][0]["inserted"] == 3 + 1 + 4
    assert_equals_history(cli, table_rows(uri))

    again = export(cli, uri)  # nothing new: no commit
    assert not again["committed"] and again["delta_version"] == 0

    # a late payload between exported versions (a backfill): valid_to of 08-02's rows change
    late = ingest(cli, tmp_path, "2025-08-05")
    second = export(cli, uri)
    assert second["committed"] and second["delta_version"] == 1
    assert second["sources"][0]["updated"] >= 1
    assert_equals_history(cli, table_rows(uri))

    # a retraction: the run's versions get retracted_at, the ones before reopen
    cli.json("retract", late["run_id"])
    third = export(cli, uri)
    assert third["committed"] and third["sources"][0]["inserted"] == 0
    rows = table_rows(uri)
    assert any(r["retracted_at"] is not None for r in rows)
    assert_equals_history(cli, rows)

    # a new year: a second valid-year partition
    ingest(cli, tmp_path, "2025-12-30")
    ingest(cli, tmp_path, "2026-01-02")
    export(cli, uri)
    rows = table_rows(uri)
    assert {r["valid_year"] for r in rows} == {2025, 2026}
    assert_equals_history(cli, rows)

    # polars reads the same rows
    frame = pl.read_delta(uri)
    assert frame.height == len(rows)
    assert sorted(frame["version_id"].to_list()) == sorted(r["version_id"] for r in rows)

    # the table as of a valid date equals `snapshot` (polars' own filter)
    for day in ("2025-08-01", "2025-08-03", "2025-08-04", "2025-08-06", "2026-01-05"):
        at = datetime.fromisoformat(f"{day}T12:00:00+00:00")
        standing = frame.filter(
            pl.col("retracted_at").is_null()
            & (pl.col("valid_from") <= at)
            & (pl.col("valid_to").is_null() | (pl.col("valid_to") > at))
            & ~pl.col("deleted")
        )
        mine = sorted(standing.select(HEADER).rows())
        text = cli("snapshot", SRC, "--valid", f"{day}T12:00:00+00:00").stdout
        theirs = sorted(tuple(r) for r in list(csv.reader(io.StringIO(text)))[1:])
        assert mine == theirs, day


def test_time_travel_equals_asof_known_at(cli: Cli, tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    export(cli, uri)
    ingest(cli, tmp_path, "2025-08-02")
    run = ingest(cli, tmp_path, "2025-08-03")
    export(cli, uri)
    cli.json("retract", run["run_id"])
    export(cli, uri)
    ingest(cli, tmp_path, "2025-08-05")
    last = export(cli, uri)
    assert last["delta_version"] == 3
    valid_times = ["2025-08-01T12:00:00+00:00", "2025-08-02T12:00:00+00:00",
                   "2025-08-03T12:00:00+00:00", "2025-08-06T00:00:00+00:00"]  # fmt: skip
    for version in range(4):
        known = position(uri, version)
        assert known is not None
        rows = table_rows(uri, version)
        assert_equals_history(cli, rows, known_at=known)
        for key in ("1", "2", "3", "4"):
            for valid in valid_times:
                answer = cli.json("asof", SRC, key, "--valid", valid, "--known-at", iso_us(known))
                standing = [
                    r for r in rows
                    if r["key"] == key and r["retracted_at"] is None
                    and r["valid_from"].isoformat() <= valid
                    and (r["valid_to"] is None or valid < r["valid_to"].isoformat())
                ]  # fmt: skip
                assert len(standing) <= 1
                found = standing[0] if standing else None
                if found is None or found["deleted"]:
                    assert answer["status"] in ("absent", "not_known"), (version, key, valid)
                else:
                    assert answer["status"] == "present", (version, key, valid)
                    assert answer["version"]["payload_id"] == found["payload_id"]
                    assert answer["version"]["attributes"]["zoning"] == found["zoning"]


def test_several_sources_in_one_table_one_commit_per_call(cli: Cli, tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    declare(cli)
    cli("source", "add", "weld", "--key", "parcel_id", "--timezone", "UTC")
    ingest(cli, tmp_path, "2025-08-01")
    weld = tmp_path / "weld.csv"
    weld.write_text("parcel_id,zoning,owner,area\n9,W,wes,5\n")
    cli("ingest", "weld", str(weld), "--published-at", "2025-08-01")
    both = cli.json("export", "delta", SRC, "weld", "--to", uri)
    assert both["delta_version"] == 0 and [s["inserted"] for s in both["sources"]] == [3, 1]
    ingest(cli, tmp_path, "2025-08-02")
    later = cli.json("export", "delta", SRC, "weld", "--to", uri)
    assert later["delta_version"] == 1  # one commit for the call
    assert [s["inserted"] for s in later["sources"]] == [1, 0]
    rows = table_rows(uri)
    assert {r["source"] for r in rows} == {SRC, "weld"}
    assert_equals_history(cli, [r for r in rows if r["source"] == SRC])
    assert position(uri, 1) is not None
    assert len(deltalake_history(uri)) == 2


def deltalake_history(uri: str) -> list[dict[str, object]]:
    import deltalake

    found: list[dict[str, object]] = deltalake.DeltaTable(uri).history()
    return found
