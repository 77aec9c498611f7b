"""A payload diffed against an empty state (a source's first load): every observation
but a delete marker is `added`, nothing else can happen, so no join is needed.

`against_nothing` gives exactly what `compute(obs, empty_state())` gives (versions in
key order, no outcomes, the same counts: tests/diff/test_first_load_diff.py), built from
the observations' own columns: the key, hash, revision and idx columns are the
observations' (gathered into key order a column at a time, each source column dropped
once gathered; nothing gathered when the payload is already in key order), and the
columns that hold one value on every row -- `change` ("added"), `deleted` (false),
`prev_version_id` (null) and, for a source without a revision field, `revision` (null)
-- are constant columns that are never materialised row by row. A 10M-row first load's
versions are then ~36 bytes a row where the join's were ~70 (bench/README.md,
"10M under a 1 GiB budget, stop 40")."""

from __future__ import annotations

import polars as pl

from feedledger.model.types import ChangeKind

# the schema of `compute`'s outcomes (none are made against an empty state)
OUTCOME_SCHEMA = pl.Schema(
    {
        "key": pl.String(),
        "outcome": pl.String(),
        "revision": pl.String(),
        "current_revision": pl.String(),
        "hash": pl.Int64(),
        "idx": pl.UInt32(),
    }
)


def against_nothing(
    obs: pl.DataFrame | list[pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """(versions, outcomes, counts) of `obs` diffed against an empty state. `obs` as a
    one-item list is taken from it (the list emptied), so that the observations and
    their versions never exist whole at once beyond one column."""
    frame = obs.pop() if isinstance(obs, list) else obs
    frame = frame.select("key", "hash", "revision", "idx", "deleted")
    observed = frame.height
    markers = frame.get_column("deleted").fill_null(False)
    marked = int(markers.sum())
    if marked:
        # a delete marker of a key the state never held: `already_current`, not a version
        frame = frame.filter(~markers)
    del markers
    frame = _key_ordered(frame.drop("deleted"))
    if frame.get_column("revision").null_count() == frame.height:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("revision"))
    versions = frame.select(
        pl.col("key"),
        pl.lit(ChangeKind.ADDED.value, dtype=pl.String).alias("change"),
        pl.lit(False, dtype=pl.Boolean).alias("deleted"),
        pl.col("hash"),
        pl.col("revision"),
        pl.col("idx").cast(pl.UInt32),
        pl.lit(None, dtype=pl.Int64).alias("prev_version_id"),
    )
    counts = {
        "observations": observed,
        "live_before": 0,
        "added": observed - marked,
        "changed": 0,
        "deleted": 0,
        "unchanged": marked,
        "superseded": 0,
        "unresolved": 0,
    }
    return versions, pl.DataFrame(schema=OUTCOME_SCHEMA), counts


def _key_ordered(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame.sort("key", maintain_order=True)`, a column at a time: the order computed
    from the keys once, then each column gathered in it and dropped from `frame` before
    the next is (nothing at all when the keys are already in order)."""
    keys = frame.get_column("key")
    if frame.height < 2 or (keys.null_count() == 0 and keys.is_sorted()):
        return frame
    del keys
    order = frame.select(pl.arg_sort_by("key", maintain_order=True)).to_series()
    columns = []
    for name in frame.columns:
        columns.append(frame.get_column(name).gather(order))
        frame = frame.drop(name)
    return pl.DataFrame(columns)
