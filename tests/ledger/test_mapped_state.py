"""A large state cache file (ledger/statecache.py, `MAP_BYTES`) is memory-mapped instead of
copied: the frame read equals the state recomputed from the ledger, and stays readable
after its file is replaced by the next payload's state and pruned."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.diff.compute import STATE_SCHEMA
from feedledger.ledger import statecache
from feedledger.ledger.stateparts import StateParts, write_parts
from feedledger.pipeline.intake.ingest import ingest
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


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("partitioned", [False, True])
def test_a_state_written_in_parts_some_empty_reads_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: bool, partitioned: bool
) -> None:
    # a partitioned diff's next state arrives one key-hash partition at a time, and
    # with more partitions than keys most of them are empty
    state = pl.DataFrame(
        {
            "key": [f'["{i}"]' for i in range(7)],
            "version_id": list(range(7)),
            "hash": [i * 31 for i in range(7)],
            "revision": [None, "r1", None, None, "r4", None, None],
            "deleted": [False] * 6 + [True],
        },
        schema=STATE_SCHEMA,
    )
    empty = state.clear()
    parts = [empty, state[:3], empty, empty, state[3:4], state[4:], empty]
    path = tmp_path / "state.arrow"
    write_parts(path, StateParts(iter(parts), len(parts)) if partitioned else iter(parts))
    monkeypatch.setattr(statecache, "MAP_BYTES", 0 if mapped else 1 << 40)
    back = statecache._read(path)
    assert back.schema == STATE_SCHEMA
    assert_frame_equal(back.sort("key"), state)
    assert_frame_equal(statecache._read(path).clear(), empty)


def test_a_state_written_in_parts_holds_each_parts_texts_once(tmp_path: Path) -> None:
    # parts filtered out of one larger frame refer to its whole text buffers; written as
    # they are, every part would carry every key's text
    keys = [f'["parcel-{i:012d}"]' for i in range(40_000)]
    state = pl.DataFrame(
        {
            "key": keys,
            "version_id": range(40_000),
            "hash": range(40_000),
            "revision": [f"revision-{i:012d}" for i in range(40_000)],
            "deleted": [False] * 40_000,
        },
        schema=STATE_SCHEMA,
    )
    parts = [state.filter(pl.col("version_id") % 8 == p) for p in range(8)]
    path = tmp_path / "state.arrow"
    write_parts(path, iter(parts))
    texts = sum(len(k) for k in keys) + 40_000 * len("revision-000000000000")
    # each key's and revision's text once, its view and the numbers: ~3 MB, not ~15 MB
    assert path.stat().st_size < texts + 40_000 * (16 + 16 + 8 + 8 + 1) + (1 << 20)
    assert_frame_equal(statecache._read(path).sort("version_id"), state)
