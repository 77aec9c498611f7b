"""Under the default bound (a source declared without a `memory_budget`, a payload of
`sizes.bound_from()` bytes or more), a payload compressed as a keyframe streamed from
its file is compressed on the other core beside its apply, as the whole path's
payloads are; a source's own budget keeps that compression after the apply. The
transaction's chunks of version rows are whole record batches of the spilled payload
where the budget allows a batch or more."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from feedledger import config
from feedledger.archive import LocalArchive
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.formats import csv_batched, spill
from feedledger.model import sizes
from feedledger.pipeline.intake import bounded, ingest
from helpers import Cli, MakeSource
from pipeline.bounded_payloads import parcels, write

MiB = 1024**2
GiB = 1024**3


def test_a_streamed_compression_runs_beside_the_apply_only_under_the_default_bound(
    cli: Cli,
    workspace: Workspace,
    make_source: MakeSource,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_source("free")
    make_source("declared", memory_budget="64MiB")
    monkeypatch.setenv(sizes.BOUND_FROM_ENV, "1KiB")
    monkeypatch.setenv(sizes.BUDGET_ENV, "64MiB")
    # every payload read in batches and compressed streamed from its file (as one of
    # hundreds of megabytes would be)
    monkeypatch.setattr(csv_batched, "WHOLE_READ_FACTOR", 10**9)
    monkeypatch.setattr(bounded, "MAX_DELTA_BYTES", 1)
    events: list[tuple[str, str, bool]] = []  # (source, what, on the main thread)
    real_apply, real_settle = ingest.apply_archived, LocalArchive.settle_streamed

    def main() -> bool:
        return threading.current_thread() is threading.main_thread()

    def spy_apply(ctx: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
        events.append((src.name, "apply", main()))
        result = real_apply(ctx, src, *args, **kwargs)
        events.append((src.name, "applied", main()))
        return result

    def spy_settle(archive: LocalArchive, source: str, sha256: str) -> list[str]:
        events.append((source, "compress", main()))
        return real_settle(archive, source, sha256)

    monkeypatch.setattr(ingest, "apply_archived", spy_apply)
    monkeypatch.setattr(LocalArchive, "settle_streamed", spy_settle)
    days = [write(parcels(3000, day), tmp_path / f"d{day}.csv") for day in (1, 2)]
    for day, path in enumerate(days, start=1):
        for name in ("free", "declared"):
            cli.json("ingest", name, str(path), "--published-at", f"2026-08-0{day}")
    free = [e[1:] for e in events if e[0] == "free"]
    declared = [e[1:] for e in events if e[0] == "declared"]
    # the default bound's: on a stage thread of its own, started with the apply (done
    # once the ingest returns: each payload's object is compressed, below)
    assert sorted(free) == sorted([("compress", False), ("apply", True), ("applied", True)] * 2)
    assert [e for e in free if e[0] != "compress"] == [("apply", True), ("applied", True)] * 2
    # a declared budget's: on the main thread, once the payload is applied
    assert declared == [("apply", True), ("applied", True), ("compress", True)] * 2
    with Context(workspace) as ctx:
        for name in ("free", "declared"):
            stored = [ctx.archive.objects.stored(ref.sha256) for ref in ctx.archive.scan(name)]
            assert len(stored) == 2
            assert all(s is not None and s.encoding == "keyframe" for s in stored)
            assert all(item.ok for item in ctx.archive.verify(name))
    for name in ("free", "declared"):
        cli("verify", name)
    snapshots = [cli("snapshot", n, "--valid", "2026-08-02").stdout for n in ("free", "declared")]
    assert snapshots[0] == snapshots[1] and snapshots[0].count("\n") > 2900


def test_the_default_budgets_chunks_are_whole_spilled_batches() -> None:
    free = config.make_source("free", key=("id",))
    bound = sizes.within_default(free, 10 * GiB)
    rows = bounded.chunk_rows(bound)
    assert rows is not None and rows % spill.BATCH_ROWS == 0
    # within the chunks' share of the budget, as before
    assert rows * 2 * bounded.CHUNK_BYTES_PER_ROW <= GiB * bounded.CHUNK_SHARE
    for budget in ("4GiB", "2GiB"):
        rows = bounded.chunk_rows(config.make_source("d", key=("id",), memory_budget=budget))
        assert rows is not None and rows % spill.BATCH_ROWS == 0
    # a budget too small for one batch keeps its share (or the least chunk)
    small = config.make_source("small", key=("id",), memory_budget="64MiB")
    assert bounded.chunk_rows(small) == int(64 * MiB * bounded.CHUNK_SHARE) // (
        2 * bounded.CHUNK_BYTES_PER_ROW
    )
    assert bounded.chunk_rows(free) is None
