"""The demo workspace (`feedledger demo`): a synthetic county parcel feed over a few
weeks, ingested payload by payload through the public API as a user would, with one
parcel going R-1 -> MU-2 -> MU-3 and one deleted and re-published; then a zoning layer of
polygons fetched from a FeatureServer served for the demo (demo/zoning.py)."""

from __future__ import annotations

import csv
import io
import os
import shutil
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import feedledger as fl
from feedledger.demo.zoning import ZoningDemo, run_zoning

if TYPE_CHECKING:
    from feedledger import Ingested

SOURCE = "larimer"
PARCEL = "0714-22-1"
START = date(2026, 8, 3)

_BASE = [
    ("0714-22-1", "R-1", "Hughes, A.", "1204 Laporte Ave", "0.21"),
    ("0714-22-2", "R-1", "Ortega, M.", "1210 Laporte Ave", "0.19"),
    ("0714-22-3", "R-2", "Finch Trust", "1216 Laporte Ave", "0.33"),
    ("0801-10-7", "C-1", "Old Town LLC", "150 N College Ave", "0.48"),
    ("0801-10-8", "MU-2", "Poudre Co-op", "160 N College Ave", "0.52"),
    ("0902-33-4", "I-1", "Riverside Works", "801 Riverside Ave", "2.75"),
]


def _day(n: int) -> list[tuple[str, str, str, str, str]]:
    rows = [list(r) for r in _BASE]
    if n >= 1:
        rows[0][1] = "MU-2"  # rezoned on day 1
    if n >= 3:
        rows[0][1] = "MU-3"  # and again on day 3
    if n >= 2:
        rows[3][2] = "Old Town Holdings LLC"  # sold
    if 2 <= n < 4:
        rows = [r for r in rows if r[0] != "0902-33-4"]  # briefly missing: deleted...
    if n >= 4:
        rows.append(["1003-01-9", "R-2", "Nguyen, T.", "77 Shields St", "0.27"])  # new lot
    return [tuple(r) for r in rows]  # type: ignore[misc]


def _csv(rows: list[tuple[str, str, str, str, str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["parcel_id", "zoning", "owner", "address", "acres"])
    w.writerows(rows)
    return buf.getvalue().encode()


# publication days of the demo feed (weekly-ish, as the county posts them)
OFFSETS = [0, 3, 7, 10, 14]


@dataclass(frozen=True)
class Demo:
    """The demo workspace's folder and its ingested files, each with its live run, and
    the zoning layer's runs (None when built without it)."""

    workspace: Path
    files: list[Path]
    results: list[Ingested]
    zoning: ZoningDemo | None = None


def build_demo(
    directory: str | os.PathLike[str], *, store: str | None = None, zoning: bool = True
) -> Demo:
    """(Re)create the demo workspace in `directory` and ingest its payloads; open it with
    `feedledger.open(demo.workspace)`. `zoning`: also serve the zoning layer on 127.0.0.1
    for the time of the demo and run the `zoning` source (--connector arcgis) over it."""
    directory = Path(directory).resolve()
    if (directory / "feedledger.toml").exists():
        for item in ("feedledger.toml", ".feedledger", "feed"):
            path = directory / item
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    files: list[Path] = []
    results: list[Ingested] = []
    with fl.init(directory, store=store) as led:
        src = led.add_source(
            SOURCE,
            key=("parcel_id",),
            format="csv",
            kind="snapshot",
            timezone="America/Denver",
            cadence="daily",
            fetch=str(directory / "feed"),
        )
        feed = directory / "feed"
        feed.mkdir(exist_ok=True)
        for n, offset in enumerate(OFFSETS):
            day = START + timedelta(days=offset)
            path = feed / f"{SOURCE}_{day.isoformat()}.csv"
            path.write_bytes(_csv(_day(n)))
            files.append(path)
            results.append(
                src.ingest(
                    path.read_bytes(),
                    published_at=day.isoformat(),
                    name=path.name,
                    content_type="text/csv",
                )
            )
        layer = run_zoning(led) if zoning else None
    return Demo(directory, files, results, layer)
