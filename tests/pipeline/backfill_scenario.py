"""The outage and backfill scenario shared by the backfill, replay, query, ledger and
notify tests: parcel 0714-22-1 of `larimer` (America/Denver) was R-0 when the 2026-08-02
payload was applied live; the scheduler was then down, and the archive holds the
payloads of 08-04 (R-1), 08-06 (MU-2) and 08-09 (MU-3) only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.ledger.schema import metadata, outbox
from feedledger.ledger.store import Store
from feedledger.notify import tables as _notify_tables  # noqa: F401  (its tables in `metadata`)
from feedledger.sync import tables as _sync_tables  # noqa: F401  (its tables in `metadata`)
from helpers import Cli, write_csv

SRC = "larimer"
KEY, OTHER = "0714-22-1", "0714-22-2"
HEADER = ["parcel", "zoning", "owner"]
LIVE = ("2026-08-02", "R-0")
ARCHIVED = (("2026-08-04", "R-1"), ("2026-08-06", "MU-2"), ("2026-08-09", "MU-3"))
WINDOW = ("--from", "2026-08-03", "--to", "2026-08-11")
MISSING = ["2026-08-03", "2026-08-05", "2026-08-07", "2026-08-08", "2026-08-10", "2026-08-11"]
VOLATILE = {"run_id", "recorded_at"}  # differ between two workspaces with the same history


def at(day: str, hour: int = 6) -> str:
    """00:00 America/Denver of `day` as the CLI prints it (MDT = 06:00Z, MST = 07:00Z)."""
    return f"{day}T{hour:02d}:00:00+00:00"


def ingest_args(tmp_path: Path, day: str, zoning: str) -> list[str]:
    rows = [[KEY, zoning, "county"], [OTHER, "A", "x"]]
    path = write_csv(tmp_path / f"{SRC}_{day}.csv", HEADER, rows)
    return ["ingest", SRC, str(path), "--published-at", day]


def archive(cli: Cli, tmp_path: Path, *payloads: tuple[str, str]) -> None:
    for day, zoning in payloads:
        _ingest, source, path, *when = ingest_args(tmp_path, day, zoning)
        cli("archive", "add", source, path, *when)


def declare(cli: Cli) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")


def outage(cli: Cli, tmp_path: Path) -> dict[str, Any]:
    """The seed's situation; returns the live run of 08-02."""
    declare(cli)
    live = cli.json(*ingest_args(tmp_path, *LIVE))
    archive(cli, tmp_path, *ARCHIVED)
    return live


def backfill(cli: Cli, *extra: str) -> dict[str, Any]:
    result: dict[str, Any] = cli.json("backfill", SRC, *WINDOW, *extra)
    return result


def zonings(cli: Cli, *extra: str) -> list[tuple[str, str]]:
    return [
        (h["valid_from"], h["attributes"]["zoning"]) for h in cli.json("history", SRC, KEY, *extra)
    ]


def normalised(cli: Cli) -> dict[str, Any]:
    """Standing history of both parcels, the gaps and the watermark, minus run ids and
    transaction times."""

    def strip(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in i.items() if k not in VOLATILE} for i in items]

    return {
        "history": {k: strip(cli.json("history", SRC, k)) for k in (KEY, OTHER)},
        "gaps": strip(cli.json("gaps", SRC)),
        "watermark": cli.json("watermark", SRC),
    }


def fetch(ws: Workspace, *stmts: Any) -> list[list[Any]]:
    """The rows of each statement, read through one connection."""
    store = Store(ws.store_url)
    try:
        with store.engine.connect() as conn:
            return [list(conn.execute(stmt)) for stmt in stmts]
    finally:
        store.close()


def outbox_rows(ws: Workspace) -> list[Any]:
    return fetch(ws, select(outbox).order_by(outbox.c.outbox_id))[0]


def dump(ws: Workspace, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Every row of every ledger table, for "nothing changed" checks."""
    names = [name for name in metadata.tables if name not in skip]
    found = fetch(ws, *(select(metadata.tables[name]) for name in names))
    return {
        name: sorted(json.dumps(list(r), default=str) for r in rows)
        for name, rows in zip(names, found, strict=True)
    }


def error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return str(lines[0])


def verified(cli: Cli) -> bool:
    result = cli("verify", SRC, "--json", expect=None)
    return result.exit_code == 0 and bool(json.loads(result.stdout)["ok"])


def runs_by_kind(cli: Cli, kind: str) -> list[dict[str, Any]]:
    return [r for r in cli.json("runs", SRC) if r["kind"] == kind]
