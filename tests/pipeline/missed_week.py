"""The missed week shared by the missed-publication, lease and scheduler tests: `larimer`
(America/Denver) applied 08-02 (R-0) live; its fetch folder then collected one file a
day, 08-03 ... 08-11, in which parcel 0714-22-1 goes R-1 (08-03 .. 08-05), MU-2 (08-06 ..
08-08), MU-3 (08-09 ..), and parcel 0714-22-2 changes every day.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from helpers import Cli, write_csv

SRC = "larimer"
KEY, OTHER = "0714-22-1", "0714-22-2"
HEADER = ["parcel", "zoning", "owner"]
WEEK = [(date(2026, 8, 3) + timedelta(days=i)).isoformat() for i in range(9)]  # 08-03..08-11


def zoning_of(day: str) -> str:
    return "R-1" if day < "2026-08-06" else ("MU-2" if day < "2026-08-09" else "MU-3")


def publish(folder: Path, day: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [[KEY, zoning_of(day), "county"], [OTHER, "A", f"owner-{day}"]]
    return write_csv(folder / f"{SRC}_{day}.csv", HEADER, rows)


def setup(cli: Cli, tmp_path: Path, days: list[str] = WEEK, *extra: str) -> Path:
    """The source with its fetch folder; 08-02 applied live; `days` waiting."""
    feed = tmp_path / "exports"
    first = write_csv(tmp_path / f"{SRC}_2026-08-02.csv", HEADER, [[KEY, "R-0", "county"]])
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    cli("ingest", SRC, str(first), "--published-at", "2026-08-02")
    cli(
        "source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver",
        "--fetch", str(feed), "--replace", *extra,
    )  # fmt: skip
    for day in days:
        publish(feed, day)
    return feed
