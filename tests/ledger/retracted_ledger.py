"""A small ledger with retractions and the transaction times at which visibility can
change on it: shared by the visibility and feature-folder tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import Cli
from pipeline.backfill_scenario import backfill, ingest_args, outage


def ledger_with_retractions(cli: Cli, tmp_path: Path) -> None:
    outage(cli, tmp_path)  # a live run, then a week archived
    first = backfill(cli)
    cli.json("retract", first["run_id"])  # versions, applications and gaps retracted
    backfill(cli)  # the same week again
    cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))


def visibility_instants(rows: list[Any]) -> list[int | None]:
    """Every transaction time at which visibility can change, either side of it."""
    times = {t for r in rows for t in (r.recorded_at, r.retracted_at) if t is not None}
    return [None, *sorted({t + d for t in times for d in (-1, 0, 1)})]
