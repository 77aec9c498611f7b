"""A source whose normal volume is known, and a burst far outside it that is held for
review: shared by the review and lease tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import Cli, write_csv


def ingest_day(tmp_path: Path, day: int, values: dict[int, str]) -> list[str]:
    rows = [[str(i), values.get(i, "a")] for i in range(30)]
    path = write_csv(tmp_path / f"s_2026-08-{day:02d}.csv", ["id", "v"], rows)
    return ["ingest", "s", str(path), "--published-at", f"2026-08-{day:02d}"]


def setup(cli: Cli, tmp_path: Path) -> Path:
    cli("source", "add", "s", "--key", "id", "--hold-factor", "5", "--hold-min-changes", "10")
    out = tmp_path / "sub.jsonl"
    cli("subscriber", "add", "f", "--file", str(out))
    cli.json(*ingest_day(tmp_path, 1, {}))  # first load: 30 changes, never held (no normal yet)
    cli.json(*ingest_day(tmp_path, 2, {0: "b"}))  # 1 change
    cli.json(*ingest_day(tmp_path, 3, {0: "b", 1: "c"}))  # 1 change
    return out


def held_burst(cli: Cli, tmp_path: Path) -> dict[str, Any]:
    burst = cli.json(*ingest_day(tmp_path, 4, {i: "z" for i in range(30)}))  # 30 changes
    assert burst["held_for_review"] is True and burst["changes"] == 30
    runs = {r["run_id"]: r for r in cli.json("runs", "s")}
    assert runs[burst["run_id"]]["status"] == "held"
    return burst
