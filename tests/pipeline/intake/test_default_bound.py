"""A source declared without a `memory_budget` is bounded by default where the whole
path would not be: a payload of `sizes.bound_from()` bytes or more is read, diffed and
compressed as if the source's budget were `sizes.default_budget()`, live and in a
backfill, and the ledger records exactly what the whole ingest records; a diff too
large for the default budget is partitioned to it. A source's own budget overrides the
default; the environment changes or disables it. The thresholds are forced tiny here
(the environment), as a payload of hundreds of megabytes would meet them; what the
bounded path holds is test_bounded_ingest.py's (the default chooses that path, with
the default budget, for the reader, the diff and the compression alike)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedledger import config
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.formats import csv_batched
from feedledger.model import sizes
from feedledger.model.errors import ConfigError
from feedledger.pipeline.intake import bounded
from helpers import Cli, MakeSource
from pipeline.bounded_payloads import parcels, write

MiB = 1024**2
GiB = 1024**3


@pytest.fixture
def batched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int | None]]]:
    """The (source, budget) of each payload read in batches; every payload read within a
    budget is (as one hundreds of times larger would be), and its diff is partitioned."""
    monkeypatch.setattr(csv_batched, "WHOLE_READ_FACTOR", 10**9)
    monkeypatch.setattr(bounded, "DIFF_BYTES_PER_ROW", 64 * 1024)
    seen: list[tuple[str, int | None]] = []
    real = csv_batched.read_csv_batched

    def spy(data: bytes, src: Any, label: str, **options: Any) -> Any:
        seen.append((src.name, src.memory_budget))
        return real(data, src, label, **options)

    real_file = csv_batched.read_csv_file

    def spy_file(path: Path, src: Any, label: str, **options: Any) -> Any:
        seen.append((src.name, src.memory_budget))  # a file given to `ingest`, read in pieces
        return real_file(path, src, label, **options)

    monkeypatch.setattr(csv_batched, "read_csv_batched", spy)
    monkeypatch.setattr(csv_batched, "read_csv_file", spy_file)
    yield seen


def test_a_large_payload_without_a_budget_is_ingested_within_the_default_one(
    cli: Cli,
    make_source: MakeSource,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    batched: list[tuple[str, int | None]],
) -> None:
    make_source("whole")
    make_source("parcels")
    make_source("archived")
    days = [write(parcels(3000, day), tmp_path / f"d{day}.csv") for day in (1, 2)]
    counts = ("observations", "live_before", "added", "changed", "deleted", "unchanged")
    monkeypatch.setenv(sizes.BOUND_FROM_ENV, "1KiB")
    monkeypatch.setenv(sizes.BUDGET_ENV, "64MiB")
    for day, path in enumerate(days, start=1):
        at = f"2026-08-0{day}"
        cli("archive", "add", "archived", str(path), "--published-at", at)
        monkeypatch.setenv(sizes.BUDGET_ENV, "none")
        whole = cli.json("ingest", "whole", str(path), "--published-at", at)
        monkeypatch.setenv(sizes.BUDGET_ENV, "64MiB")
        bound = cli.json("ingest", "parcels", str(path), "--published-at", at)
        assert [bound[c] for c in counts] == [whole[c] for c in counts]
        assert bound["changes"] == whole["changes"]
    assert whole["changed"] == 60 and whole["deleted"] == 6 and whole["added"] == 6
    # a backfill of archived payloads: within the default budget too
    cli.json("backfill", "archived", "--from", "2026-08-01", "--to", "2026-08-02")
    assert batched == [("parcels", 64 * MiB)] * 2 + [("archived", 64 * MiB)] * 2
    for name in ("parcels", "archived"):
        cli("verify", name)
    for at in ("2026-08-01", "2026-08-02"):
        snapshots = [
            cli("snapshot", name, "--valid", at).stdout for name in ("whole", "parcels", "archived")
        ]
        assert snapshots[0] == snapshots[1] == snapshots[2]
        assert snapshots[0].count("\n") > 2900


def test_a_payload_below_the_threshold_takes_the_whole_path(
    cli: Cli,
    make_source: MakeSource,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    batched: list[tuple[str, int | None]],
) -> None:
    make_source("parcels")
    make_source("declared", memory_budget="64MiB")
    path = write(parcels(300), tmp_path / "d1.csv")
    monkeypatch.setenv(sizes.BOUND_FROM_ENV, str(path.stat().st_size + 1))
    for name in ("parcels", "declared"):
        cli.json("ingest", name, str(path), "--published-at", "2026-08-01")
    # the source's own budget applies whatever the payload's size
    assert batched == [("declared", 64 * MiB)]


def test_the_default_bound_follows_its_rule_and_its_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    free = config.make_source("free", key=("id",))
    declared = config.make_source("declared", key=("id",), memory_budget="4GiB")
    assert (sizes.default_budget(), sizes.bound_from()) == (GiB, 256 * MiB)
    assert sizes.within_default(free, 256 * MiB - 1) is free
    assert sizes.within_default(free, 256 * MiB).memory_budget == GiB
    assert sizes.within_default(free, 256 * MiB) == free.model_copy(update={"memory_budget": GiB})
    assert sizes.within_default(declared, 10 * GiB) is declared
    # a diff too large for the default budget is partitioned to it; 1M rows and their
    # state are not (the whole diff, as before)
    assert bounded.partitions(free, 1_000_000, 1_000_000) == 1
    assert bounded.partitions(free, 10_000_000, 10_000_000) == 15
    assert bounded.partitions(declared, 10_000_000, 10_000_000) == 4
    monkeypatch.setenv(sizes.BUDGET_ENV, "2GiB")
    monkeypatch.setenv(sizes.BOUND_FROM_ENV, "1MiB")
    assert sizes.within_default(free, MiB).memory_budget == 2 * GiB
    assert sizes.within_default(free, MiB - 1) is free
    monkeypatch.setenv(sizes.BUDGET_ENV, "none")
    assert sizes.within_default(free, 10 * GiB) is free
    assert bounded.partitions(free, 10_000_000, 10_000_000) == 1
    monkeypatch.setenv(sizes.BUDGET_ENV, "lots")
    with pytest.raises(ConfigError, match="FEEDLEDGER_MEMORY_BUDGET"):
        sizes.within_default(free, 10 * GiB)


def test_a_bad_default_bound_in_the_environment_refuses_the_ingest_before_archiving(
    cli: Cli,
    workspace: Workspace,
    make_source: MakeSource,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_source("parcels")
    path = write(parcels(30), tmp_path / "d1.csv")
    monkeypatch.setenv(sizes.BOUND_FROM_ENV, "soon")
    failed = cli("ingest", "parcels", str(path), "--published-at", "2026-08-01", expect=None)
    assert failed.exit_code != 0
    assert "FEEDLEDGER_MEMORY_BUDGET_FROM" in failed.output
    with Context(workspace) as ctx:
        assert list(ctx.archive.scan("parcels")) == []
    monkeypatch.delenv(sizes.BOUND_FROM_ENV)
    assert cli.json("ingest", "parcels", str(path), "--published-at", "2026-08-01")["added"] == 30
