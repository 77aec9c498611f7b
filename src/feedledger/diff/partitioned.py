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
        return _owned(
            frame.with_columns(
                global_idx.gather(frame.get_column("idx")).cast(frame.schema["idx"]).alias("idx")
            )
        )

    return DiffResult(
        versions=to_global(result.versions),
        outcomes=to_global(result.outcomes),
        counts=result.counts,
    )


def _owned(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (a part's few versions or outcomes) with texts of its own: its string
    columns were gathered from the part's observations and state, whose text buffers
    a gathered column keeps alive whole -- every part's, until the parts are merged
    (a 3M-key next day, 6 parts: +200 MiB of buffers held for ~2 MiB of rows; the state
    read a partition at a time, ledger/stateparts.py, holds its record batch's whole
    body). Copied out as plain strings, then viewed again."""
    if not any(dtype == pl.String for dtype in frame.schema.values()):
        return frame
    owned = pl.from_arrow(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))
    assert isinstance(owned, pl.DataFrame)
    return owned


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
    """The parts' diffs as one (versions and outcomes sorted by key, counts summed).
    Consumes `results` (the list is emptied): each part's rows are freed as the whole
    is put in key order, a column at a time, so that the parts and the whole never
    exist at once beyond one column (a 10M-row first load's versions: ~600 MiB)."""
    if not results:
        raise ValueError("merge needs at least one part's diff")
    counts = {name: sum(r.counts[name] for r in results) for name in _COUNTS}
    versions = [r.versions for r in results]
    outcomes = [r.outcomes for r in results]
    results.clear()
    return DiffResult(
        versions=_key_ordered(versions), outcomes=_key_ordered(outcomes), counts=counts
    )


def _key_ordered(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`pl.concat(frames).sort("key", maintain_order=True)`, `frames` emptied: the
    order is computed from the keys, then each column is gathered in it and its parts
    dropped before the next column is."""
    whole = pl.concat(frames, how="vertical", rechunk=False)
    frames.clear()
    if whole.height < 2:
        return whole.rechunk()
    order = whole.select(pl.arg_sort_by("key", maintain_order=True)).to_series()
    columns = []
    for name in whole.columns:
        columns.append(whole.get_column(name).gather(order))
        whole = whole.drop(name)
    return pl.DataFrame(columns)


def part(frame: pl.DataFrame, partitions: int, p: int) -> pl.DataFrame:
    """The rows of `frame` (which has `kh`) in partition p, in the frame's order."""
    return frame.filter(partition_of(partitions) == p)


def parts_of(frame: pl.DataFrame, partitions: int) -> Callable[[int], pl.DataFrame]:
    """`lambda p: part(frame, partitions, p)`, each row's partition worked out once for
    all parts (a small integer a row) rather than once a part: the number of parts grows
    with the rows under a budget, so working them out per part grew as rows x parts
    (10M observations and 10M state rows in 15 parts: ~2x the per-row cost at 3M).
    Used by `compute_partitioned`; `pipeline/intake/bounded.next_state` keeps `part` (a 10M next
    day with it there peaked higher, unexplained: bench/README.md, "10M time (helper big,
    2026-12-06)")."""
    if partitions == 1:
        return lambda p: frame
    ids = partition_ids(frame, partitions)
    return lambda p: frame.filter(ids == p)


def partition_ids(frame: pl.DataFrame, partitions: int) -> pl.Series:
    """Each row's partition as the smallest integer type that holds it, from the frame's
    key hash `kh`, or from its key (the hash made on the fly, never kept)."""
    small = pl.UInt8 if partitions <= 256 else pl.UInt16 if partitions <= 65536 else pl.UInt32
    if "kh" not in frame.columns:
        frame = with_key_hash(frame.select("key"))
    return frame.select(partition_of(partitions).cast(small)).to_series()


def compute_partitioned(
    obs: pl.DataFrame | list[pl.DataFrame],
    state: pl.DataFrame,
    *,
    kind: PayloadKind,
    use_revision: bool,
    partitions: int,
    state_parts: Callable[[int], pl.DataFrame] | None = None,
) -> DiffResult:
    """`compute(obs, state, ...)`, done in `partitions` key-hash parts, each part's state
    rows taken from the whole state only when it is diffed (or given by `state_parts`:
    partition p's rows of `state`, as `part` makes them, read from wherever they are
    kept). `obs` given as a one-item list is taken from it (the list emptied): its rows
    are then split into the parts a column at a time, each column freed once split, and
    each part freed once diffed, so that the observations and their diff never exist
    whole at once."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    held = obs if isinstance(obs, list) else [obs]
    obs_parts = _split_taking(held, partitions)
    obs_parts.reverse()  # popped in partition order
    if state_parts is None:
        state_parts = parts_of(with_key_hash(state), partitions)
    return merge(
        list(
            diff_parts(
                lambda p: obs_parts.pop(),
                state_parts,
                partitions,
                kind=kind,
                use_revision=use_revision,
            )
        )
    )


def _split_taking(held: list[pl.DataFrame], partitions: int) -> list[pl.DataFrame]:
    """`split(held.pop(), partitions)`, made a column at a time: each column of the
    frame is dropped once its parts are made (the frame and its parts never exist
    whole at once beyond one column when `held` had the only reference)."""
    frame = with_key_hash(held.pop())
    if partitions == 1:
        return [frame]
    which = frame.select(partition_of(partitions).alias("__part")).to_series()
    columns: list[list[pl.Series]] = [[] for _ in range(partitions)]
    for name in frame.columns:
        column = frame.get_column(name)
        frame = frame.drop(name)
        pieces = pl.DataFrame([column, which]).partition_by(
            "__part", as_dict=True, include_key=False, maintain_order=True
        )
        empty = column.clear()
        del column
        for p in range(partitions):
            got = pieces.get((p,))
            columns[p].append(got.get_column(name) if got is not None else empty)
        del pieces
    return [pl.DataFrame(part_columns) for part_columns in columns]
