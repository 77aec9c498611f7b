"""An ingest's compression of its raw object starts as soon as the payload is archived
and registered, and the read-only diff ahead of the lease runs beside it; while the
archive is still writing the bytes when the read ends, the diff runs then instead, beside
that write (pipeline/intake/ingest.py). Events, not times: a wrong order waits out a generous
deadline and fails."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from feedledger.archive.core import BlobArchive
from feedledger.pipeline.intake import ingest as ingest_module
from helpers import Cli, write_csv

DEADLINE_S = 30.0  # only a wrong order waits it out


def _two_days(cli: Cli, tmp_path: Path) -> Path:
    cli("source", "add", "p", "--key", "id")
    rows = [[str(i), f"R{i % 7}"] for i in range(400)]
    day1 = write_csv(tmp_path / "p_2026-08-01.csv", ["id", "zoning"], rows)
    cli("ingest", "p", str(day1), "--published-at", "2026-08-01")
    rows[3][1] = "changed"
    return write_csv(tmp_path / "p_2026-08-02.csv", ["id", "zoning"], rows)


def _archive_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "feedledger-archive"]


def test_the_diff_ahead_runs_beside_the_compression_once_the_bytes_are_written(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day2 = _two_days(cli, tmp_path)
    settling, order = threading.Event(), []
    settle, diff_ahead = BlobArchive.settle, ingest_module._diff_ahead
    warm_store = ingest_module.warm_store

    def written_first(ctx: Any) -> Any:
        # the store is ready only once the archive has written the bytes (its thread ended)
        result = warm_store(ctx)
        for thread in _archive_threads():
            thread.join(DEADLINE_S)
        return result

    def settled(self: BlobArchive, *args: Any) -> list[str]:
        order.append("compress")
        settling.set()
        return settle(self, *args)

    def diffed(*args: Any) -> Any:
        # beside the compression: it has started by now
        order.append(f"diff (compressing: {settling.wait(DEADLINE_S)})")
        return diff_ahead(*args)

    monkeypatch.setattr(ingest_module, "warm_store", written_first)
    monkeypatch.setattr(BlobArchive, "settle", settled)
    monkeypatch.setattr(ingest_module, "_diff_ahead", diffed)
    cli("ingest", "p", str(day2), "--published-at", "2026-08-02")
    assert order == ["compress", "diff (compressing: True)"]
    assert cli.json("history", "p", "3")[-1]["attributes"]["zoning"] == "changed"


def test_the_diff_ahead_covers_an_archive_still_writing_the_bytes(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day2 = _two_days(cli, tmp_path)
    diffed_first, order = threading.Event(), []
    store_raw, diff_ahead = ingest_module._store_raw, ingest_module._diff_ahead

    def slow_write(*args: Any) -> str:
        # the bytes are written only once the diff has run (so: while they were not yet)
        order.append(f"written (diffed: {diffed_first.wait(DEADLINE_S)})")
        return store_raw(*args)

    def diffed(*args: Any) -> Any:
        order.append("diff")
        diffed_first.set()
        return diff_ahead(*args)

    monkeypatch.setattr(ingest_module, "_store_raw", slow_write)
    monkeypatch.setattr(ingest_module, "_diff_ahead", diffed)
    cli("ingest", "p", str(day2), "--published-at", "2026-08-02")
    assert order == ["diff", "written (diffed: True)"]
    assert cli.json("history", "p", "3")[-1]["attributes"]["zoning"] == "changed"
