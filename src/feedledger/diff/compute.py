"""Snapshot / change-set diff, columnar (one join, no per-row Python).

Inputs: the payload's observations (idx, key, hash, revision, deleted) and the
source's current state (key, version_id, hash, revision, deleted) — one row per key
ever seen, tombstones included, so a delayed older revision cannot resurrect a
deleted entity.

Rules (see docs/architecture.md, Vocabulary: outcome):
* new key -> added; a key whose current version is a tombstone -> added again
  (present -> deleted -> present), unless the revision guard says the observation
  is older (superseded) or equal (unresolved).
* live key, same content hash -> unchanged (`already_current`).
* live key, different hash -> changed; with a revision field: newer revision ->
  changed, older -> `superseded`, equal -> `unresolved` (never applied).
* `snapshot` payloads: a live key absent from the payload -> deleted (tombstone).
  `changes` payloads delete only records carrying a delete marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from feedledger.diff import aligned
from feedledger.diff.first_load import against_nothing
from feedledger.model.hashing import with_key_hash
from feedledger.model.types import ChangeKind, Outcome, PayloadKind

STATE_SCHEMA = pl.Schema(
    {
        "key": pl.String(),
        "version_id": pl.Int64(),
        "hash": pl.Int64(),
        "revision": pl.String(),
        "deleted": pl.Boolean(),
    }
)

# Columns of DiffResult.versions (one row per change == one new version)
VERSION_COLUMNS = ["key", "change", "deleted", "hash", "revision", "idx", "prev_version_id"]


def empty_state() -> pl.DataFrame:
    return pl.DataFrame(schema=STATE_SCHEMA)


@dataclass
class DiffResult:
    versions: pl.DataFrame  # VERSION_COLUMNS
    outcomes: pl.DataFrame  # key, outcome, revision, current_revision, hash, idx
    counts: dict[str, int] = field(default_factory=dict)
    # each version's row in the state it was diffed against (null: a key new to it), so
    # that `next_state` writes the changed rows in place; None: not known
    state_rows: pl.Series | None = None

    @property
    def n_changes(self) -> int:
        return self.versions.height


def _revision_cmp(new: pl.Expr, cur: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(newer, older) comparing revisions numerically when both are integers, else as
    text (ISO timestamps order correctly as text). A missing current revision makes the
    observation newer; a missing new revision (a bare delete marker) too."""
    new_i = new.cast(pl.Int64, strict=False)
    cur_i = cur.cast(pl.Int64, strict=False)
    both_int = new_i.is_not_null() & cur_i.is_not_null()
    unknown = new.is_null() | cur.is_null()
    newer = pl.when(unknown).then(True).when(both_int).then(new_i > cur_i).otherwise(new > cur)
    older = pl.when(unknown).then(False).when(both_int).then(new_i < cur_i).otherwise(new < cur)
    return newer, older


# Verdict codes (the join's 1M-row verdict column is a UInt8, named only at the end).
_ADDED, _CHANGED, _DELETED, _UNCHANGED, _SUPERSEDED, _UNRESOLVED = range(6)
_NAMES = {
    _ADDED: ChangeKind.ADDED.value,
    _CHANGED: ChangeKind.CHANGED.value,
    _DELETED: ChangeKind.DELETED.value,
    _UNCHANGED: Outcome.ALREADY_CURRENT.value,
    _SUPERSEDED: Outcome.SUPERSEDED.value,
    _UNRESOLVED: Outcome.UNRESOLVED.value,
}


def _code(value: int) -> pl.Expr:
    return pl.lit(value, dtype=pl.UInt8)


def _verdict(use_revision: bool) -> pl.Expr:
    exists = pl.col("si").is_not_null()
    cur_deleted = pl.col("cur_deleted").fill_null(False)
    live = exists & ~cur_deleted
    tomb = exists & cur_deleted
    same = pl.col("hash") == pl.col("cur_hash")
    if use_revision:
        newer, older = _revision_cmp(pl.col("revision"), pl.col("cur_rev"))
        equal = ~newer & ~older
    else:
        older, equal = pl.lit(False), pl.lit(False)
    is_del = pl.col("deleted")
    return (
        # delete markers (changes payloads)
        pl.when(is_del & ~live)
        .then(_code(_UNCHANGED))
        .when(is_del & older)
        .then(_code(_SUPERSEDED))
        .when(is_del)
        .then(_code(_DELETED))
        # upserts
        .when(~exists)
        .then(_code(_ADDED))
        .when(tomb & older)
        .then(_code(_SUPERSEDED))
        .when(tomb & equal)
        .then(_code(_UNRESOLVED))
        .when(tomb)
        .then(_code(_ADDED))
        .when(same)
        .then(_code(_UNCHANGED))
        .when(older)
        .then(_code(_SUPERSEDED))
        .when(equal)
        .then(_code(_UNRESOLVED))
        .otherwise(_code(_CHANGED))
        .alias("verdict")
    )


def _join(obs: pl.DataFrame, state: pl.DataFrame, on: str, use_revision: bool) -> pl.DataFrame:
    """Each observation with its key's current state row (`si`, its index in `state`)."""
    rev = ["revision"] if use_revision else []
    left = obs.select(on, "idx", "hash", "deleted", *rev)
    right = state.select(
        pl.col(on),
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("si"),
        pl.col("version_id").alias("cur_vid"),
        pl.col("hash").alias("cur_hash"),
        pl.col("deleted").alias("cur_deleted"),
        *([pl.col("revision").alias("cur_rev")] if use_revision else []),
    )
    return left.join(right, on=on, how="left")


def _aligned(obs: pl.DataFrame, state: pl.DataFrame, use_revision: bool) -> pl.DataFrame | None:
    """`_join`'s result found by position when observations and state are both in key
    order (diff/aligned.py), no key hash needed; None otherwise."""
    si = aligned.sorted_rows(obs.get_column("key"), state.get_column("key"))
    if si is None:
        return None
    rev = ["revision"] if use_revision else []
    current = [("version_id", "cur_vid"), ("hash", "cur_hash"), ("deleted", "cur_deleted")]
    if use_revision:
        current.append(("revision", "cur_rev"))
    return obs.select("idx", "hash", "deleted", *rev).with_columns(
        si, *(state.get_column(name).gather(si).alias(alias) for name, alias in current)
    )


def _keys_match(obs: pl.DataFrame, state: pl.DataFrame, joined: pl.DataFrame) -> bool:
    """True if every observation joined on the key hash found its own key (a 64-bit
    key-hash collision would pair it with another key, or pair two rows)."""
    if joined.height != obs.height:
        return False
    matched = joined.select("idx", "si").filter(pl.col("si").is_not_null())
    if not matched.height:
        return True
    ours = obs.get_column("key").gather(matched.get_column("idx"))
    theirs = state.get_column("key").gather(matched.get_column("si"))
    return bool((ours == theirs).all())


def compute(
    obs: pl.DataFrame,
    state: pl.DataFrame,
    *,
    kind: PayloadKind,
    use_revision: bool,
) -> DiffResult:
    """Diff one payload's observations (`idx` must be 0..n-1 in row order) against the
    source's current state. Against an empty state (a first load) no join is made
    (diff/first_load.py; the same result)."""
    if not state.height:
        return first_load(obs)
    # Both in key order (a sorted export, diffed against the state it left): each
    # observation's state row found by position, confirmed on the key text
    joined = _aligned(obs, state, use_revision)
    if joined is None:
        # Join on the 64-bit key hash, carrying only numbers through the 1M-row join; any
        # collision is detected and the join redone on the key text, so a collision can
        # cost time but never correctness.
        obs, state = with_key_hash(obs), with_key_hash(state)
        joined = _join(obs, state, "kh", use_revision)
        if not _keys_match(obs, state, joined):
            joined = _join(obs, state, "key", use_revision)
    judged = joined.select("idx", "si", "hash", "cur_hash", "cur_vid", _verdict(use_revision))
    tally = dict(judged.get_column("verdict").value_counts().iter_rows())

    def named(rows: pl.DataFrame) -> pl.DataFrame:
        """The chosen rows with their key and revision texts (gathered, not joined)."""
        idx, si = rows.get_column("idx"), rows.get_column("si")
        return rows.with_columns(
            obs.get_column("key").gather(idx).alias("key"),
            obs.get_column("revision").gather(idx).alias("revision"),
            state.get_column("revision").gather(si).alias("cur_rev"),
            pl.col("verdict").replace_strict(_NAMES, return_dtype=pl.String).alias("name"),
        )

    is_del = pl.col("verdict") == _DELETED
    upserts = named(judged.filter(pl.col("verdict") <= _DELETED)).select(
        pl.col("key"),
        pl.col("name").alias("change"),
        is_del.alias("deleted"),
        pl.when(is_del).then(pl.col("cur_hash")).otherwise(pl.col("hash")).alias("hash"),
        pl.when(is_del)
        .then(pl.coalesce(pl.col("revision"), pl.col("cur_rev")))
        .otherwise(pl.col("revision"))
        .alias("revision"),
        pl.when(is_del).then(pl.lit(None, dtype=pl.UInt32)).otherwise(pl.col("idx")).alias("idx"),
        pl.col("cur_vid").alias("prev_version_id"),
        pl.col("si"),
    )
    frames = [upserts]
    if kind == PayloadKind.SNAPSHOT and state.height:
        # live keys the snapshot does not mention: every state row no observation joined
        seen = pl.repeat(False, state.height, dtype=pl.Boolean, eager=True).scatter(
            judged.get_column("si").drop_nulls(), True
        )
        absent = state.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("si")).filter(
            ~seen & ~pl.col("deleted")
        )
        frames.append(
            absent.select(
                pl.col("key"),
                pl.lit(ChangeKind.DELETED.value).alias("change"),
                pl.lit(True).alias("deleted"),
                pl.col("hash"),
                pl.col("revision"),
                pl.lit(None, dtype=pl.UInt32).alias("idx"),
                pl.col("version_id").alias("prev_version_id"),
                pl.col("si"),
            )
        )
    versions = pl.concat(frames, how="vertical").sort("key")
    state_rows = versions.get_column("si")
    versions = versions.drop("si")

    outcomes = (
        named(judged.filter(pl.col("verdict") >= _SUPERSEDED))
        .select(
            pl.col("key"),
            pl.col("name").alias("outcome"),
            pl.col("revision"),
            pl.col("cur_rev").alias("current_revision"),
            pl.col("hash"),
            pl.col("idx"),
        )
        .sort("key")
    )

    live_before = int(state.height - state.get_column("deleted").sum()) if state.height else 0
    counts = {
        "observations": obs.height,
        "live_before": live_before,
        "added": int(tally.get(_ADDED, 0)),
        "changed": int(tally.get(_CHANGED, 0)),
        "deleted": int(versions.get_column("deleted").sum()),
        "unchanged": int(tally.get(_UNCHANGED, 0)),
        "superseded": int(tally.get(_SUPERSEDED, 0)),
        "unresolved": int(tally.get(_UNRESOLVED, 0)),
    }
    return DiffResult(versions=versions, outcomes=outcomes, counts=counts, state_rows=state_rows)


def first_load(obs: pl.DataFrame | list[pl.DataFrame]) -> DiffResult:
    """`compute(obs, empty_state())` (diff/first_load.py); `obs` as a one-item list is
    taken from it (see `against_nothing`)."""
    versions, outcomes, counts = against_nothing(obs)
    # every key is new to the state: no version has a row in it
    rows = pl.repeat(None, versions.height, dtype=pl.UInt32, eager=True).alias("si")
    return DiffResult(versions=versions, outcomes=outcomes, counts=counts, state_rows=rows)


def next_state(
    state: pl.DataFrame, versions: pl.DataFrame, rows: pl.Series | None = None
) -> pl.DataFrame:
    """State after applying `versions` (which must carry `version_id`). `rows`: each
    version's row in `state` (`DiffResult.state_rows`, null for a key new to it): the
    rows it changes are then written in place and the new keys appended, O(changes)
    beyond copying the changed columns, with no join on the 1M keys; without it, every
    key of `state` is looked up in the versions'. Rows come in no particular order, but
    with `rows` a state in key order stays in key order (diff/aligned.py pairs it with
    a key-ordered payload by position)."""
    new_rows = versions.select("key", "version_id", "hash", "revision", "deleted").cast(
        STATE_SCHEMA
    )
    if not state.height:
        return new_rows
    state = state.select(list(STATE_SCHEMA))
    if rows is None or rows.len() != new_rows.height:
        kept = state.join(new_rows.select("key"), on="key", how="anti")
        return pl.concat([kept, new_rows], how="vertical")
    known = rows.is_not_null()
    at = rows.filter(known)
    changed = new_rows.filter(known)
    # (a clone shares the state's buffers; `scatter` copies them before writing, so the
    # frame the state came from -- a resident process's warm one -- is never altered)
    patched = state.with_columns(
        state.get_column(name).clone().scatter(at, changed.get_column(name))
        for name in ("version_id", "hash", "revision", "deleted")
    )
    return aligned.with_new_keys(patched, new_rows.filter(~known))
