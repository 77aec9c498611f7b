"""The diff in key-hash partitions: observations and state split by their key hash
into `partitions` parts, each part diffed alone by `compute`, the results put
together — equal to one `compute` over the whole (tests/diff/test_partitioned_diff.py).

A key's partition depends on its key hash only (`partition_of`), so a key's
observation and its state row always meet in the same part; a 64-bit key-hash
collision puts the colliding keys in one part too, where `compute` notices it and
joins on the key text. Each part's memory is about 1/partitions of the whole diff's,
which is what bounds the diff's working set (`diff_parts` is the generator form: one
part at a time, for a caller that writes each part's versions before diffing the next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from feedledger.diff.compute import DiffResult, compute
from feedledger.model.hashing import with_key_hash
from feedledger.model.types import PayloadKind

# Counts that are plain sums over the parts (every one of compute's counts)
_COUNTS = (
    "observations",
    "live_before",
    "added",
    "changed",
    "deleted",
    "unchanged",
    "superseded",
    "unresolved",
)


def partition_of(partitions: int) -> pl.Expr:
    """The partition (0..partitions-1, UInt32) of each row, from its key hash `kh`."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    return (pl.col("kh").reinterpret(signed=False) % partitions).cast(pl.UInt32).alias("part")


def split(frame: pl.DataFrame, partitions: int) -> list[pl.DataFrame]:
    """`frame` (which has `key`, and `kh` or not) in `partitions` parts by key hash, each
    part keeping the frame's row order and its `kh` column; empty parts included."""
    hashed = with_key_hash(frame)
    if partitions == 1:
        return [hashed]
    parts = hashed.with_columns(partition_of(partitions)).partition_by(
        "part", as_dict=True, include_key=False, maintain_order=True
    )
    empty = hashed.clear()
    return [parts.get((p,), empty) for p in range(partitions)]


def _part_diff(
    obs: pl.DataFrame, state: pl.DataFrame, *, kind: PayloadKind, use_revision: bool
) -> DiffResult:
    """`compute` on one part, its `idx` values the payload's (global) record indexes."""
    global_idx = obs.get_column("idx")
    local = obs.with_columns(pl.int_range(obs.height, dtype=pl.UInt32).alias("idx"))
    result = compute(local, state, kind=kind, use_revision=use_revision)

    def to_global(frame: pl.DataFrame) -> pl.DataFrame:
        if frame.is_empty():
            return frame
        return frame.with_columns(
            global_idx.gather(frame.get_column("idx")).cast(frame.schema["idx"]).alias("idx")
        )

    return DiffResult(
        versions=to_global(result.versions),
        outcomes=to_global(result.outcomes),
        counts=result.counts,
    )


def diff_parts(
    obs_parts: Callable[[int], pl.DataFrame],
    state_parts: Callable[[int], pl.DataFrame],
    partitions: int,
    *,
    kind: PayloadKind,
    use_revision: bool,
) -> Iterator[DiffResult]:
    """Each partition's diff in turn; `obs_parts(p)` and `state_parts(p)` give the rows of
    partition p (as `split` makes them), read only when that part is diffed. Each result
    is sorted by key within its part; the concatenation of all, sorted by key, is
    `compute` of the whole (`merge`)."""
    for p in range(partitions):
        yield _part_diff(obs_parts(p), state_parts(p), kind=kind, use_revision=use_revision)


def merge(results: list[DiffResult]) -> DiffResult:
    """The parts' diffs as one (versions and outcomes sorted by key, counts summed)."""
    if not results:
        raise ValueError("merge needs at least one part's diff")
    versions = pl.concat([r.versions for r in results], how="vertical").sort("key")
    outcomes = pl.concat([r.outcomes for r in results], how="vertical").sort("key")
    counts = {name: sum(r.counts[name] for r in results) for name in _COUNTS}
    return DiffResult(versions=versions, outcomes=outcomes, counts=counts)


def part(frame: pl.DataFrame, partitions: int, p: int) -> pl.DataFrame:
    """The rows of `frame` (which has `kh`) in partition p, in the frame's order."""
    return frame.filter(partition_of(partitions) == p)


def parts_of(frame: pl.DataFrame, partitions: int) -> Callable[[int], pl.DataFrame]:
    """`lambda p: part(frame, partitions, p)`, each row's partition worked out once for
    all parts (a small integer a row) rather than once a part: the number of parts grows
    with the rows under a budget, so working them out per part grew as rows x parts
    (10M observations and 10M state rows in 15 parts: ~2x the per-row cost at 3M).
    Used by `compute_partitioned`; `pipeline/bounded.next_state` keeps `part` (a 10M next
    day with it there peaked higher, unexplained: bench/README.md, "10M time (helper big,
    2026-12-06)")."""
    if partitions == 1:
        return lambda p: frame
    small = pl.UInt8 if partitions <= 256 else pl.UInt16 if partitions <= 65536 else pl.UInt32
    ids = frame.select(partition_of(partitions).cast(small)).to_series()
    return lambda p: frame.filter(ids == p)


def compute_partitioned(
    obs: pl.DataFrame,
    state: pl.DataFrame,
    *,
    kind: PayloadKind,
    use_revision: bool,
    partitions: int,
) -> DiffResult:
    """`compute(obs, state, ...)`, done in `partitions` key-hash parts, each part's rows
    taken from the whole frames only when it is diffed (one part's copy at a time)."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    obs, state = with_key_hash(obs), with_key_hash(state)
    return merge(
        list(
            diff_parts(
                parts_of(obs, partitions),
                parts_of(state, partitions),
                partitions,
                kind=kind,
                use_revision=use_revision,
            )
        )
    )
