"""Reference diff for tests: the straightforward formulation (text verdicts, the key
text carried through the join) that `feedledger.diff.compute` must equal exactly.

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

import polars as pl

from feedledger.diff import DiffResult
from feedledger.model.hashing import with_key_hash
from feedledger.model.types import ChangeKind, Outcome, PayloadKind


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


def reference_compute(
    obs: pl.DataFrame,
    state: pl.DataFrame,
    *,
    kind: PayloadKind,
    use_revision: bool,
) -> DiffResult:
    obs = with_key_hash(obs)
    state = with_key_hash(state)
    cur = state.rename(
        {
            "key": "cur_key",
            "version_id": "cur_vid",
            "hash": "cur_hash",
            "revision": "cur_rev",
            "deleted": "cur_deleted",
        }
    )
    # Join on the 64-bit key hash (fast); any collision is detected and the join redone
    # on the key text, so a collision can cost time but never correctness.
    joined = obs.join(cur, on="kh", how="left")
    by_text = joined.height != obs.height or bool(
        joined.select(
            (pl.col("cur_key").is_not_null() & (pl.col("cur_key") != pl.col("key"))).any()
        ).item()
    )
    if by_text:
        joined = obs.join(
            cur.drop("kh"), left_on="key", right_on="cur_key", how="left", coalesce=False
        )
    exists = pl.col("cur_vid").is_not_null()
    live = exists & ~pl.col("cur_deleted").fill_null(False)
    tomb = exists & pl.col("cur_deleted").fill_null(False)
    same = pl.col("hash") == pl.col("cur_hash")
    if use_revision:
        newer, older = _revision_cmp(pl.col("revision"), pl.col("cur_rev"))
        equal = ~newer & ~older
    else:
        newer, older, equal = pl.lit(True), pl.lit(False), pl.lit(False)

    is_del = pl.col("deleted")
    verdict = (
        # delete markers (changes payloads)
        pl.when(is_del & ~live)
        .then(pl.lit(Outcome.ALREADY_CURRENT.value))
        .when(is_del & live & older)
        .then(pl.lit(Outcome.SUPERSEDED.value))
        .when(is_del & live)
        .then(pl.lit(ChangeKind.DELETED.value))
        # upserts
        .when(~exists)
        .then(pl.lit(ChangeKind.ADDED.value))
        .when(tomb & older)
        .then(pl.lit(Outcome.SUPERSEDED.value))
        .when(tomb & equal & pl.lit(use_revision))
        .then(pl.lit(Outcome.UNRESOLVED.value))
        .when(tomb)
        .then(pl.lit(ChangeKind.ADDED.value))
        .when(same)
        .then(pl.lit(Outcome.ALREADY_CURRENT.value))
        .when(older)
        .then(pl.lit(Outcome.SUPERSEDED.value))
        .when(equal & pl.lit(use_revision))
        .then(pl.lit(Outcome.UNRESOLVED.value))
        .otherwise(pl.lit(ChangeKind.CHANGED.value))
        .alias("verdict")
    )
    judged = joined.with_columns(verdict)

    change_kinds = [c.value for c in ChangeKind]
    upserts = judged.filter(pl.col("verdict").is_in(change_kinds)).select(
        pl.col("key"),
        pl.col("verdict").alias("change"),
        (pl.col("verdict") == ChangeKind.DELETED.value).alias("deleted"),
        pl.when(pl.col("verdict") == ChangeKind.DELETED.value)
        .then(pl.col("cur_hash"))
        .otherwise(pl.col("hash"))
        .alias("hash"),
        pl.when(pl.col("verdict") == ChangeKind.DELETED.value)
        .then(pl.coalesce(pl.col("revision"), pl.col("cur_rev")))
        .otherwise(pl.col("revision"))
        .alias("revision"),
        pl.when(pl.col("verdict") == ChangeKind.DELETED.value)
        .then(pl.lit(None, dtype=pl.UInt32))
        .otherwise(pl.col("idx"))
        .alias("idx"),
        pl.col("cur_vid").alias("prev_version_id"),
    )
    frames = [upserts]
    if kind == PayloadKind.SNAPSHOT:
        on = "key" if by_text else "kh"
        absent = state.filter(~pl.col("deleted")).join(obs.select(on), on=on, how="anti")
        frames.append(
            absent.select(
                pl.col("key"),
                pl.lit(ChangeKind.DELETED.value).alias("change"),
                pl.lit(True).alias("deleted"),
                pl.col("hash"),
                pl.col("revision"),
                pl.lit(None, dtype=pl.UInt32).alias("idx"),
                pl.col("version_id").alias("prev_version_id"),
            )
        )
    versions = pl.concat(frames, how="vertical").sort("key")

    others = [Outcome.SUPERSEDED.value, Outcome.UNRESOLVED.value]
    outcomes = (
        judged.filter(pl.col("verdict").is_in(others))
        .select(
            pl.col("key"),
            pl.col("verdict").alias("outcome"),
            pl.col("revision"),
            pl.col("cur_rev").alias("current_revision"),
            pl.col("hash"),
            pl.col("idx"),
        )
        .sort("key")
    )

    tally = dict(judged.group_by("verdict").len().iter_rows())
    live_before = int(state.height - state.get_column("deleted").sum()) if state.height else 0
    counts = {
        "observations": obs.height,
        "live_before": live_before,
        "added": int(tally.get(ChangeKind.ADDED.value, 0)),
        "changed": int(tally.get(ChangeKind.CHANGED.value, 0)),
        "deleted": int(versions.filter(pl.col("deleted")).height),
        "unchanged": int(tally.get(Outcome.ALREADY_CURRENT.value, 0)),
        "superseded": int(tally.get(Outcome.SUPERSEDED.value, 0)),
        "unresolved": int(tally.get(Outcome.UNRESOLVED.value, 0)),
    }
    return DiffResult(versions=versions, outcomes=outcomes, counts=counts)
