"""A large state cache file (ledger/statecache.py, `MAP_BYTES`) is memory-mapped instead of
copied: the frame read equals the state recomputed from the ledger, and stays readable
after its file is replaced by the next payload's state and pruned."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import statecache
from feedledger.pipeline.ingest import ingest
from helpers import MakeSource


def csv(values: dict[str, str]) -> bytes:
    return ("id,v\n" + "".join(f"{k},{v}\n" for k, v in values.items())).encode()


def test_a_mapped_state_is_the_ledgers_state_and_outlives_its_file(
    workspace: Workspace, make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statecache, "MAP_BYTES", 0)  # every state file is mapped
    make_source("a", key="id")
    day1 = {str(i): f"v{i}" for i in range(500)}
    with Context(workspace, warm_sources=0) as ctx:
        ingest(ctx, "a", csv(day1), published_at="2026-01-01")
        mapped, wm = ctx.cache.load("a")
        expected, _ = ctx.store.read_state("a")
        key = ["key"]
        assert_frame_equal(mapped.sort(key), expected.sort(key), check_row_order=False)
        day2 = {**day1, "7": "changed", "900": "new"}
        del day2["3"]
        result = ingest(ctx, "a", csv(day2), published_at="2026-01-02")
        assert [result.counts[c] for c in ("added", "changed", "deleted")] == [1, 1, 1]
        # the first file is pruned: the frame mapped from it still reads
        assert_frame_equal(mapped.sort(key), expected.sort(key))
        assert mapped.filter(pl.col("deleted")).height == 0
        again, _ = ctx.cache.load("a")
        now, _ = ctx.store.read_state("a")
        assert_frame_equal(again.sort(key), now.sort(key))
        assert wm is not None
