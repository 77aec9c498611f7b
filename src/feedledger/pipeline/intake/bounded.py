"""A payload's diff within its source's `memory_budget`: in key-hash partitions
(diff/partitioned.py) when the whole diff would need more than its share of the budget,
and the rows a spilled payload's transaction will encode kept in memory when they are
few (formats/spill.py).

A source without a `memory_budget` is bounded by default where the whole path would
not be: a payload of `DEFAULT_BOUND_FROM` bytes or more (256 MiB: the whole read and
apply peak at about six to eight times the payload, so below it a source stays under
~2 GiB) is ingested as if its source's budget were `DEFAULT_MEMORY_BUDGET` (1 GiB:
model/sizes.py, `within_default`, called by the ingest and the backfill before the
read), and a diff whose payload and state together would need more than that budget is
partitioned to it (`partitions`). A source's own `memory_budget` overrides both;
the environment's `FEEDLEDGER_MEMORY_BUDGET` (a size, or `none`: no default bound) and
`FEEDLEDGER_MEMORY_BUDGET_FROM` (a size) change them for the process. Below both
thresholds: the whole diff at once, as always.

The payload's read (a CSV payload larger than the budget allows is read in batches,
its string columns spilled: formats/csv_batched.py) and its ONE transaction are
unchanged otherwise (invariant 2)."""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl

from feedledger.archive.codec import MAX_DELTA_BYTES
from feedledger.diff import DiffResult, compute, first_load
from feedledger.diff import next_state as after
from feedledger.diff.partitioned import compute_partitioned, part, partition_ids
from feedledger.formats import Observations
from feedledger.ledger.stateparts import StateParts, StoredState
from feedledger.model.hashing import with_key_hash
from feedledger.model.sizes import default_budget
from feedledger.model.source import SourceConfig

# What the one-join diff holds per row of payload and state together (the join, the
# verdicts, the gathers: bench/big_source_bench.py measured ~190 bytes at 10M rows)
DIFF_BYTES_PER_ROW = 200
# The diff's share of the budget (the rest: the payload's frame, the state, the versions)
DIFF_SHARE = 0.25
# The share of the budget the rows kept for the transaction may use, and their size
KEEP_SHARE = 0.25
ROW_BYTES = 400
# The share of the budget the transaction's chunks of version rows may use (two exist
# at once: one written, one encoded ahead), and what a row of one holds (its string
# columns read back, its attribute text, the Python values a scratch file is written
# from: ledger/staging.py)
CHUNK_SHARE = 0.125
CHUNK_BYTES_PER_ROW = 1000
MIN_CHUNK_ROWS = 1000
# What a payload's compression as a delta holds, in times its size (`compress_streamed`)
DELTA_HOLDS = 3


def partitions(src: SourceConfig, obs_rows: int, state_rows: int) -> int:
    """How many key-hash partitions the diff needs to stay within the budget (1: none);
    without one, within `default_budget()` when the whole diff would need more."""
    need = (obs_rows + state_rows) * DIFF_BYTES_PER_ROW
    budget = src.memory_budget
    if budget is None:
        fallback = default_budget()
        if fallback is None or need <= fallback:
            return 1
        budget = fallback
    return max(1, math.ceil(need / (budget * DIFF_SHARE)))


def ahead_fits(obs: Observations) -> bool:
    """Whether the diff may run ahead of the lease, beside the payload's bytes (still
    held while they are archived): not for a payload read in batches to fit the budget
    (its diff waits until the bytes are freed)."""
    return not obs.on_disk


def compress_streamed(src: SourceConfig, obs: Observations, size: int) -> bool:
    """Whether a payload of `size` bytes read in batches is compressed after it is
    applied as a keyframe streamed from its file (`Archive.settle_streamed`), its bytes
    dropped first, rather than as a delta against the payload before it: when a delta
    would hold beyond the budget its bytes, its base (about its size again, mapped from
    the archive's base cache) and the new base cache file its check decodes into (its
    size once more, mapped: archive/basecache.py) -- `DELTA_HOLDS` times its size --,
    or span more than a delta may anyway (`codec.MAX_DELTA_BYTES`)."""
    if src.memory_budget is None or not obs.on_disk:
        return False
    return DELTA_HOLDS * size > src.memory_budget or 2 * size > MAX_DELTA_BYTES


def streamed_beside(declared: SourceConfig, src: SourceConfig) -> bool:
    """Whether a payload compressed streamed from its file (`compress_streamed`) is
    compressed on the other core beside its apply rather than once it is applied: when
    its budget is the default bound's (`declared`, the source as declared, has none;
    `src` is as `sizes.within_default` made it). The stream holds only the compressor's
    window and the compressed object (about a quarter of the payload), which the
    default bound's ~3 GiB at 10M parcels leaves room for beside the diff and the
    transaction (+~160 MiB of peak at 10M: 2.69 GiB), and it took ~15 % of a 10M
    ingest's wall after the apply (bench/README.md, "10M time"). A source's own budget
    keeps it after: its budget is its limit."""
    return declared.memory_budget is None and src.memory_budget is not None


def chunk_rows(src: SourceConfig) -> int | None:
    """The version rows the transaction encodes and writes at a time within the source's
    budget (None: the ledger's default, bulk.VERSION_CHUNK_ROWS)."""
    if src.memory_budget is None:
        return None
    from feedledger.formats.spill import BATCH_ROWS  # lazy: pyarrow, a budget's read has it

    share = int(src.memory_budget * CHUNK_SHARE) // (2 * CHUNK_BYTES_PER_ROW)
    if share >= BATCH_ROWS:
        # whole record batches of a spilled payload (formats/spill.py): a first load's
        # key-ordered chunk then reads each batch once, not the two it would straddle
        # (67,108 rows under the default 1 GiB: ~2x the batches read and decoded)
        return share // BATCH_ROWS * BATCH_ROWS
    return max(MIN_CHUNK_ROWS, share)


def compress_after(src: SourceConfig, obs: Observations) -> bool:
    """Whether a payload read in batches to fit its budget, compressed with its bytes
    (not `compress_streamed`), is compressed once it is applied rather than beside its
    apply: the compression holds the source's previous payload as its base (about the
    payload's size again, mapped from the archive's base cache) and the compressor's
    window, which the budget cannot give beside the diff and the transaction."""
    return src.memory_budget is not None and obs.on_disk


def diff(
    src: SourceConfig,
    obs: pl.DataFrame | list[pl.DataFrame],
    state: pl.DataFrame,
    stored: StoredState | None = None,
) -> DiffResult:
    """`compute(obs, state)` for `src`, partitioned as the budget requires (equal).
    `obs` as a one-item list is taken from it (see `compute_partitioned`). A first load
    (empty state) is never partitioned: it has no join to bound, and its versions are
    the observations' own columns in key order (diff/first_load.py; 10M parcels: ~36
    bytes a row, where the join's, partitioned and merged, were ~70: bench/README.md,
    "10M under a 1 GiB budget, stop 40")."""
    if not state.height:
        return first_load(obs)
    height = obs[0].height if isinstance(obs, list) else obs.height
    parts = partitions(src, height, state.height)
    use_revision = src.revision is not None
    if parts == 1:
        whole = obs.pop() if isinstance(obs, list) else obs
        return compute(whole, state, kind=src.kind, use_revision=use_revision)
    if stored is None:
        return compute_partitioned(
            obs, state, kind=src.kind, use_revision=use_revision, partitions=parts
        )
    parts = stored_partitions(parts, stored)
    return compute_partitioned(
        obs,
        state,
        kind=src.kind,
        use_revision=use_revision,
        partitions=parts,
        state_parts=_stored_part(stored, parts),
    )


def stored_partitions(parts: int, stored: StoredState) -> int:
    """The partitions of a diff that needs `parts` and reads its state from `stored`
    (a state cache file written in `stored.partitions`, ledger/stateparts.py): the
    smallest multiple of the file's at least `parts`, so that each of the diff's
    partitions lies in one of the file's (a key hash modulo a multiple of n tells its
    remainder modulo n)."""
    return stored.partitions * math.ceil(parts / stored.partitions)


def _stored_part(stored: StoredState, partitions: int) -> Callable[[int], pl.DataFrame]:
    """Partition p (of `partitions`, a multiple of the file's) of the stored state: read
    from the file's partition it lies in, alone (a 10M-key state in 8 partitions: ~75
    MiB at a time where the whole file mapped held ~600-740 MiB of its pages)."""

    def read(p: int) -> pl.DataFrame:
        rows = with_key_hash(stored.read(p % stored.partitions))
        return rows if partitions == stored.partitions else part(rows, partitions, p)

    return read


def diff_taking(
    src: SourceConfig, obs: Observations, state: pl.DataFrame, stored: StoredState | None = None
) -> DiffResult:
    """`diff(src, obs.frame, state)` for a payload read in batches, which takes the
    payload's key frame from `obs` (left with its `idx` alone: what the transaction
    reads its rows by) and frees it a part at a time while diffing (a 10M-row first
    load: the frame, ~600 MiB, and its diff are never held whole at once)."""
    held = [obs.frame]
    obs.frame = obs.frame.select("idx")
    return diff(src, held, state, stored)


def next_state(
    src: SourceConfig,
    obs_rows: int,
    state: pl.DataFrame,
    versions: pl.DataFrame,
    rows: pl.Series | None = None,
    stored: StoredState | None = None,
) -> pl.DataFrame | StateParts:
    """The state after `versions` (diff.next_state, with `rows`: the versions' rows in
    `state`, `DiffResult.state_rows`): whole, or, when the diff was cut in partitions,
    as the same partitions made one at a time while the state cache writes them, a
    partition to a record batch (the next state never exists whole beside the current
    one; `stored`: the current one is read a partition at a time from its file, as the
    diff read it)."""
    parts = partitions(src, obs_rows, state.height)
    if parts == 1:
        return after(state, versions, rows)
    if not state.height:  # a first load: its versions are the state
        ids = partition_ids(versions, parts)
        return StateParts((after(state, versions.filter(ids == p)) for p in range(parts)), parts)
    if stored is not None:
        parts = stored_partitions(parts, stored)
        ids = partition_ids(versions, parts)
        read = _stored_part(stored, parts)
        return StateParts((after(read(p), versions.filter(ids == p)) for p in range(parts)), parts)
    state, versions = with_key_hash(state), with_key_hash(versions)
    return StateParts(
        (after(part(state, parts, p), part(versions, parts, p)) for p in range(parts)), parts
    )


def keep_rows(src: SourceConfig, obs: Observations, result: DiffResult) -> None:
    """Tell a spilled payload which records' rows the transaction will encode, so that it
    reads them once when they fit the budget (a daily payload's changes)."""
    if src.memory_budget is None:
        return
    limit = int(src.memory_budget * KEEP_SHARE) // ROW_BYTES
    versions, outcomes = result.versions.get_column("idx"), result.outcomes.get_column("idx")
    # each record is one version or one outcome at most: as many records as indexes (a
    # first load's 10M are not counted one by one: that hash set alone held ~100 MiB)
    if versions.len() - versions.null_count() + outcomes.len() - outcomes.null_count() > limit:
        return
    obs.keep_rows(pl.concat([versions.drop_nulls(), outcomes.drop_nulls()]), limit=limit)
