"""Each observation's row in the state, found without a hash join when both are in key
order (the usual daily: a feed exported sorted by its key, the state in the order of the
payloads it came from, new keys after the old ones).

Two key-sorted columns pair up by position, shifted by how many state keys the payload
skips (tombstones, deletions) or adds before each point. The shift is read at every
`ANCHOR_EVERY`-th observation (a binary search of its key in the state), every
observation is compared with the state key at its block's shift, and only those that
differ (a new key, or a row after a shift inside its block) are searched for one by one.
Every pairing is confirmed on the key text, so the result is exactly the left join's on
the text: each observation's state row, or null for a key the state does not hold.
On a 1M-key daily with 1 % changes this is ~0.1 CPU s against ~0.25 for the hash join
and its collision check (bench/README.md, "The daily, stop 38").
"""

from __future__ import annotations

import polars as pl

# One binary search per this many observations; a shift inside a block costs at most
# this many searches more (tests make it small to cross many blocks)
ANCHOR_EVERY = 16


def _confirmed(keys: pl.Series, state_keys: pl.Series, at: pl.Series) -> pl.Series:
    """`at` (Int64, a candidate state row per key) where the state's key there is the
    key itself; null elsewhere (out of range or another key)."""
    last = state_keys.len() - 1
    inside = (at >= 0) & (at <= last)
    same = state_keys.gather(at.clip(0, last)) == keys
    return pl.select(pl.when(inside & same).then(at)).to_series()


def sorted_rows(
    keys: pl.Series, state_keys: pl.Series, step: int | None = None
) -> pl.Series | None:
    """Each of `keys`' row in `state_keys` (UInt32, null: absent), or None when either
    column is not in ascending order (or holds a null, or is empty): then the caller
    joins. `state_keys` are distinct (one state row per key). `step`: observations per
    anchor (default `ANCHOR_EVERY`)."""
    n, m = keys.len(), state_keys.len()
    if not n or not m or keys.null_count() or state_keys.null_count():
        return None
    if not (keys.is_sorted() and state_keys.is_sorted()):
        return None
    step = step or ANCHOR_EVERY
    # one chunk each (a mapped state file's record batches, a parse's pieces): a gather
    # from a chunked column resolves each row's chunk first (~5x the CPU at 1M rows)
    keys, state_keys = keys.rechunk(), state_keys.rechunk()
    found = state_keys.search_sorted(keys.gather_every(step), side="left").cast(pl.Int64)
    shift = found - pl.int_range(0, n, step, dtype=pl.Int64, eager=True)
    position = pl.int_range(n, dtype=pl.Int64, eager=True)
    guess = position + _each_repeated(shift, step, n)
    rows = _confirmed(keys, state_keys, guess)
    missed = rows.is_null()
    if missed.any():
        which = position.filter(missed)
        stray = keys.gather(which)
        searched = state_keys.search_sorted(stray, side="left").cast(pl.Int64)
        rows = rows.scatter(which, _confirmed(stray, state_keys, searched))
    return rows.cast(pl.UInt32).alias("si")


def _each_repeated(values: pl.Series, times: int, n: int) -> pl.Series:
    """The first `n` of `values` with each repeated `times` times (no nulls)."""
    import numpy as np  # lazy: loaded by the store's modules by the time a diff runs

    return pl.Series(values.name, np.repeat(values.to_numpy(), times)[:n])


def with_new_keys(state: pl.DataFrame, fresh: pl.DataFrame) -> pl.DataFrame:
    """`state` with the rows of keys new to it, `fresh` (in key order), after its rows;
    or, when a new key sorts before the state's last one and the state is in key order,
    each new row inserted where it keeps that order (so the next day's payload is still
    paired by position, not joined)."""
    if not fresh.height or not state.height:
        return pl.concat([state, fresh], how="vertical")
    keys, new = state.get_column("key"), fresh.get_column("key")
    if new.null_count() or not new[0] < keys[-1] or not keys.is_sorted() or not new.is_sorted():
        return pl.concat([state, fresh], how="vertical")
    # each new key's place among the old ones, then every row's place in the whole
    before = keys.search_sorted(new, side="left").cast(pl.Int64)
    old_at = pl.int_range(state.height, dtype=pl.Int64, eager=True)
    old_at = old_at + before.search_sorted(old_at, side="right").cast(pl.Int64)
    new_at = before + pl.int_range(fresh.height, dtype=pl.Int64, eager=True)
    places = pl.concat([old_at, new_at])
    order = pl.zeros(places.len(), dtype=pl.Int64, eager=True).scatter(
        places, pl.int_range(places.len(), dtype=pl.Int64, eager=True)
    )
    return pl.concat([state, fresh], how="vertical").select(pl.all().gather(order))
