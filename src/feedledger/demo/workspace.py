"""A demo workspace: a synthetic county parcel feed over a few weeks, ingested as a
user would, with one parcel going R-1 -> MU-2 -> MU-3 and one deleted and re-published;
then a zoning layer of polygons fetched from a FeatureServer (pipeline/demo_zoning.py)."""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from feedledger.config import Workspace, make_source
from feedledger.context import Context
from feedledger.ledger import engine as eng
from feedledger.pipeline.demo_zoning import ZoningResult, build_zoning
from feedledger.pipeline.ingest import IngestResult, ingest

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


@dataclass
class DemoResult:
    workspace: Path
    results: list[IngestResult] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    zoning: ZoningResult | None = None


def build_demo(directory: Path, *, store_url: str | None = None, zoning: bool = True) -> DemoResult:
    """(Re)create a demo workspace in `directory` and ingest the feed into it; then
    (`zoning`) serve the zoning layer and run the `zoning` source over it."""
    directory = directory.resolve()
    if (directory / "feedledger.toml").exists():
        for item in ("feedledger.toml", ".feedledger", "feed"):
            path = directory / item
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    ws = Workspace.create(directory, store_url=store_url, archive=None)
    engine = eng.make_engine(ws.store_url)
    eng.upgrade(engine)
    engine.dispose()
    ws.add_source(
        make_source(
            SOURCE,
            key=("parcel_id",),
            format="csv",
            kind="snapshot",
            timezone="America/Denver",
            cadence="daily",
            fetch=str(directory / "feed"),
        )
    )
    feed = directory / "feed"
    feed.mkdir(exist_ok=True)
    out = DemoResult(workspace=directory)
    with Context(Workspace.load(ws.config_path)) as ctx:
        for n, offset in enumerate(OFFSETS):
            day = START + timedelta(days=offset)
            path = feed / f"{SOURCE}_{day.isoformat()}.csv"
            path.write_bytes(_csv(_day(n)))
            out.files.append(path)
            out.results.append(
                ingest(
                    ctx,
                    SOURCE,
                    path.read_bytes(),
                    published_at=day.isoformat(),
                    original_name=path.name,
                    content_type="text/csv",
                )
            )
    if zoning:
        out.zoning = build_zoning(ws.config_path)
    return out
