"""A small parcel feed, its Delta table read back by readers no one here wrote
(`deltalake.DeltaTable(...).to_pyarrow_table()`, `polars.read_delta`), and the checks
the Delta tests share: the table's rows equal `history --json` of every key, as known
at the table's own position (a Delta version's app transaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import Cli, write_csv

deltalake = pytest.importorskip("deltalake")

SRC = "parcels"
HEADER = ["parcel_id", "zoning", "owner", "area"]
STAMPS = ("valid_from", "valid_to", "recorded_at", "retracted_at")

# day -> rows; parcel 3 deleted on 08-03, parcel 4 added on 08-03, parcel 1 changes often
DAYS: dict[str, list[list[str]]] = {
    "2025-08-01": [["1", "R-1", "ann", "100"], ["2", "A", "bob", "250.5"], ["3", "C", "cy", "7"]],
    "2025-08-02": [["1", "R-2", "ann", "100"], ["2", "A", "bob", "250.5"], ["3", "C", "cy", "7"]],
    "2025-08-03": [["1", "R-2", "ann", "100"], ["2", "A", "bo", "250.5"], ["4", "M", "di", "9"]],
    "2025-08-04": [["1", "R-3", "ann", "101"], ["2", "A", "bo", "250.5"], ["4", "M", "di", "9"]],
    "2025-08-05": [["1", "R-3", "al", "101"], ["2", "B", "bo", "250.5"], ["4", "M", "di", "9"]],
    "2025-12-30": [["1", "R-4", "al", "101"], ["2", "B", "bo", "250.5"], ["4", "M", "do", "9"]],
    "2026-01-02": [["1", "R-5", "al", "101"], ["2", "B", "bo", "250.5"], ["5", "N", "ed", "1"]],
}


def declare(cli: Cli) -> None:
    cli("source", "add", SRC, "--key", "parcel_id", "--timezone", "UTC")


def ingest(cli: Cli, tmp: Path, day: str) -> dict[str, Any]:
    path = write_csv(tmp / f"{SRC}_{day}.csv", HEADER, DAYS[day])
    result: dict[str, Any] = cli.json("ingest", SRC, str(path), "--published-at", day)
    return result


def export(cli: Cli, uri: str, *extra: str) -> dict[str, Any]:
    result: dict[str, Any] = cli.json("export", "delta", SRC, "--to", uri, *extra)
    return result


def table_rows(uri: str, version: int | None = None, options: Any = None) -> list[dict[str, Any]]:
    """Every row of the Delta table (at `version`), read by delta-rs."""
    dt = deltalake.DeltaTable(uri, version=version, storage_options=options)
    rows: list[dict[str, Any]] = dt.to_pyarrow_table().to_pylist()
    return rows


def position(uri: str, version: int | None = None, options: Any = None) -> int | None:
    dt = deltalake.DeltaTable(uri, version=version, storage_options=options)
    found = dt.transaction_version(f"feedledger/{SRC}")
    return None if found is None else int(found)


def iso_us(us: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).isoformat()


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def as_history(row: dict[str, Any]) -> dict[str, Any]:
    """A Delta row in `history --json`'s shape (attributes: the CSV's text fields)."""
    got = {name: _iso(row[name]) for name in STAMPS}
    got.update({n: row[n] for n in ("run_id", "payload_id", "deleted", "backfill")})
    got["attributes"] = None if row["deleted"] else {h: row[h] for h in HEADER}
    return got


def from_history(item: dict[str, Any]) -> dict[str, Any]:
    got = {n: item[n] for n in (*STAMPS, "run_id", "payload_id", "deleted", "backfill")}
    got["attributes"] = item["attributes"]
    return got


def keys_of(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({str(r["key"]) for r in rows})


def assert_equals_history(
    cli: Cli, rows: list[dict[str, Any]], known_at: int | None = None
) -> None:
    """The rows of every key equal `history KEY --all --json`; as known at `known_at`,
    the standing rows equal `history KEY --known-at K --json` (whose `retracted_at`
    shows a retraction made after K: the table at K has not seen it)."""
    assert rows, "the table is empty"
    ids = [r["version_id"] for r in rows]
    assert len(ids) == len(set(ids)), "a version twice"
    extra = ["--known-at", iso_us(known_at)] if known_at is not None else ["--all"]
    for key in keys_of(rows):
        mine = [r for r in rows if r["key"] == key]
        if known_at is not None:
            mine = [r for r in mine if r["retracted_at"] is None]
        mine.sort(key=lambda r: (r["valid_from"], r["recorded_at"]))
        theirs = cli.json("history", SRC, key, *extra)
        if known_at is not None:  # a retraction after K: not seen by the table at K
            for item in theirs:
                if item["retracted_at"] is not None and item["retracted_at"] > iso_us(known_at):
                    item["retracted_at"] = None
        assert [as_history(r) for r in mine] == [from_history(i) for i in theirs], (
            key,
            [as_history(r) for r in mine],
            [from_history(i) for i in theirs],
        )
