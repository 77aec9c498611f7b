"""The diff in key-hash partitions (feedledger.diff.partitioned) equals one `compute`
over the whole payload and state: random states and payloads, both payload kinds,
revisions, tombstones, delete markers, 1 to 9 partitions (most of them tiny or empty),
and key hashes forced to collide so that colliding keys share a partition."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff.frames import observation_frame as _obs
from diff.frames import state_frame as _state
from feedledger.diff import compute
from feedledger.diff.partitioned import compute_partitioned, parts_of, split
from feedledger.model.types import PayloadKind

KEYS = [f'["k{i}"]' for i in range(30)]
REVS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "2026-08-01", "b"]))
ROW = st.tuples(st.integers(0, 3), REVS, st.booleans())  # hash, revision, deleted/marker
rows = st.dictionaries(st.sampled_from(KEYS), ROW, max_size=len(KEYS))


def _degenerate_kh(frame: pl.DataFrame, buckets: int) -> pl.DataFrame:
    """A key hash with only `buckets` values, a function of the key (as the real one
    is): many keys collide, in the payload, in the state and between them."""
    number = pl.col("key").str.extract(r"(\d+)").cast(pl.Int64)
    return frame.with_columns((number % buckets).alias("kh"))


def _same(got: Any, expected: Any) -> None:
    assert got.counts == expected.counts
    assert got.versions.equals(expected.versions), (got.versions, expected.versions)
    assert got.outcomes.equals(expected.outcomes), (got.outcomes, expected.outcomes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=rows,
    obs=rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
    partitions=st.integers(1, 9),
    buckets=st.one_of(st.none(), st.integers(1, 4)),
)
def test_partitioned_diff_equals_whole_diff(
    state: dict[str, Any],
    obs: dict[str, Any],
    kind: PayloadKind,
    use_revision: bool,
    partitions: int,
    buckets: int | None,
) -> None:
    s = _state(state)
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    if buckets is not None:
        s, o = _degenerate_kh(s, buckets), _degenerate_kh(o, buckets)
    expected = compute(o, s, kind=kind, use_revision=use_revision)
    got = compute_partitioned(o, s, kind=kind, use_revision=use_revision, partitions=partitions)
    _same(got, expected)


def test_payload_indexes_survive_the_split() -> None:
    s = _state({f'["k{i}"]': (1, None, False) for i in range(20)})
    o = _obs({f'["k{i}"]': (2 if i % 3 else 1, None, False) for i in range(25)}, markers=False)
    got = compute_partitioned(o, s, kind=PayloadKind.SNAPSHOT, use_revision=False, partitions=4)
    changed = got.versions.filter(pl.col("change") != "deleted")
    # each version's idx points at its own observation in the whole payload
    assert o.get_column("key").gather(changed.get_column("idx")).equals(changed.get_column("key"))
    assert got.counts["changed"] == 13 and got.counts["added"] == 5


def test_split_keeps_every_row_once_in_its_key_hash_part() -> None:
    frame = _obs({f'["k{i}"]': (1, None, False) for i in range(50)}, markers=False)
    parts = split(frame, 7)
    assert len(parts) == 7
    together = pl.concat(parts).sort("idx")
    assert together.drop("kh").equals(frame)
    again = split(frame, 7)
    assert all(a.equals(b) for a, b in zip(parts, again, strict=True))


@pytest.mark.parametrize("partitions", [1, 3, 7, 300])
def test_parts_worked_out_once_are_the_split_parts(partitions: int) -> None:
    frame = split(_obs({f'["k{i}"]': (1, None, False) for i in range(500)}, markers=False), 1)[0]
    expected = split(frame, partitions)
    part_of = parts_of(frame, partitions)
    assert all(part_of(p).equals(expected[p]) for p in range(partitions))


def test_partitions_below_one_are_refused() -> None:
    frame = _obs({'["a"]': (1, None, False)}, markers=False)
    with pytest.raises(ValueError, match="at least 1"):
        split(frame, 0)
