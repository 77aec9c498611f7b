"""The resident tier of the state cache (ledger/statecache.py): bounded by a count of
sources, least recently used dropped first, its bytes counted, and a state handed out
only for the store id and commit sequence it was committed at."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.statecache import WarmStates
from feedledger.pipeline.intake.ingest import ingest
from feedledger.pipeline.retract import retract_run
from helpers import MakeSource


def csv(values: dict[str, str]) -> bytes:
    return ("id,v\n" + "".join(f"{k},{v}\n" for k, v in values.items())).encode()


def test_the_bound_holds_least_recently_used_first(
    workspace: Workspace, make_source: MakeSource
) -> None:
    for name in ("a", "b", "c"):
        make_source(name, key="id")
    with Context(workspace, warm_sources=2) as ctx:
        warm = ctx.cache.warm
        assert warm is not None
        for name in ("a", "b"):
            ingest(ctx, name, csv({"1": name, "2": "x"}), published_at="2026-01-01")
        ctx.cache.load("a")  # a is used again: b is now the least recently used
        ingest(ctx, "c", csv({"1": "c"}), published_at="2026-01-01")
        held = {e.source: e for e in warm.entries()}
        assert set(held) == {"a", "c"} and warm.evictions == 1
        assert warm.bytes_held == sum(e.nbytes for e in held.values()) > 0
        summary = warm.summary()
        assert summary["max_warm_sources"] == 2
        assert [s["source"] for s in summary["sources"]] == ["c", "a"]  # most recent first
        assert [s["rows"] for s in summary["sources"]] == [1, 2]


def test_nothing_is_held_with_a_bound_of_zero(
    workspace: Workspace, make_source: MakeSource
) -> None:
    make_source("a", key="id")
    with Context(workspace, warm_sources=0) as ctx:
        ingest(ctx, "a", csv({"1": "a"}), published_at="2026-01-01")
        assert ctx.cache.warm is not None and ctx.cache.warm.entries() == []


def test_a_state_is_used_only_at_its_commit_sequence(
    workspace: Workspace, make_source: MakeSource
) -> None:
    make_source("a", key="id")
    with Context(workspace, warm_sources=4) as ctx:
        warm = ctx.cache.warm
        assert warm is not None
        ingest(ctx, "a", csv({"1": "a", "2": "b"}), published_at="2026-01-01")
        second = ingest(ctx, "a", csv({"1": "A", "2": "b"}), published_at="2026-01-02")
        assert warm.hits == 1  # the second payload was diffed against the first's state
        (entry,) = warm.entries()
        assert entry.seq == ctx.store.watermark("a").txn_seq  # type: ignore[union-attr]
        state, _ = ctx.cache.load("a")
        assert warm.hits == 2 and state is entry.frame  # the very frame, no read
        assert second.run_id is not None
        retract_run(ctx, second.run_id)  # the sequence moves on: reloaded, not patched
        state, wm = ctx.cache.load("a")
        assert warm.reloads == 1
        truth, _ = ctx.store.read_state("a")
        key = ["key"]
        assert_frame_equal(state.sort(key), truth.sort(key), check_row_order=False)
        assert warm.entries()[0].seq == wm.txn_seq  # type: ignore[union-attr]


def test_another_store_id_is_never_used() -> None:
    warm = WarmStates(2)
    frame = pl.DataFrame({"key": ["1"]})
    warm.put("a", store_id=1, seq=3, frame=frame)
    assert warm.get("a", store_id=2, seq=3) is None
    assert warm.get("a", store_id=1, seq=3) is None  # the mismatch dropped it
    warm.put("a", store_id=1, seq=3, frame=frame)
    assert warm.get("a", store_id=1, seq=3) is frame


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        WarmStates(-1)
