"""The guard's verdict on one incoming document against the row a destination holds, in
Python (`judge`, for the rows it did not write) and as the SQL condition of the
conditional upsert (`GUARD`): the revision order with deletions in it (sync/target.py's
docstring has the table of verdicts). One place, so the two cannot disagree."""

from __future__ import annotations

import json
from typing import Any

from feedledger.model.destination import TOMBSTONE_HASH, is_deletion
from feedledger.sync.transform import Doc


def _gone(row: str) -> str:
    """1 if the row is a deletion (a tombstone of a record the source deleted), else 0: a
    record the transform left out is a tombstone in the place of its revision."""
    return (
        f"(CASE WHEN {row}.deleted AND {row}.content_hash = '{TOMBSTONE_HASH}' THEN 1 ELSE 0 END)"
    )


def guard_sql(new: str, held: str) -> str:
    """The SQL condition under which the incoming row `new` replaces the row `held` (table
    aliases): position p = (revision, deleted), a deletion sorting just after the revision
    it deletes."""
    newer = (
        f"({new}.revision > {held}.revision OR "
        f"({new}.revision = {held}.revision AND {_gone(new)} > {_gone(held)}))"
    )
    same = f"{new}.revision = {held}.revision AND {_gone(new)} = {_gone(held)}"
    return (
        f"({newer} AND {new}.generation_rank >= {held}.generation_rank) "
        f"OR ({same} AND {new}.generation_rank > {held}.generation_rank)"
    )


def current_sql(new: str, held: str) -> str:
    """The SQL condition of `judge`'s already_current: same position, same generation,
    same content."""
    return (
        f"({new}.revision = {held}.revision AND {_gone(new)} = {_gone(held)} AND "
        f"{new}.generation_rank = {held}.generation_rank AND "
        f"{new}.content_hash = {held}.content_hash)"
    )


GUARD = guard_sql("excluded", "t")  # the conditional upsert's WHERE


def judge(d: Doc, held: Any | None) -> tuple[str, str | None]:
    """The verdict for `d` against the row held (None: no row)."""
    if held is None:
        return "accepted", None
    r0, g0 = int(held.revision), int(held.generation_rank)
    mine = (d.revision, is_deletion(d.deleted, d.content_hash))
    theirs = (r0, is_deletion(held.deleted, held.content_hash))
    if d.rank < g0 and mine >= theirs:
        return "rejected", (
            f"newer representation guard: generation {d.generation} is older than the "
            f"destination's {held.generation} (revision {d.revision} vs {r0})"
        )
    if d.revision < r0:
        return "superseded", (
            f"fresher source data guard: revision {d.revision} is older than the destination's {r0}"
        )
    if mine < theirs:
        return "superseded", (
            f"deletion guard: the destination holds the record deleted after revision {r0}; "
            f"only a revision newer than {r0} brings it back"
        )
    if mine > theirs or d.rank > g0:
        return "accepted", None
    if d.content_hash == held.content_hash:
        return "already_current", None
    return "unresolved", (
        f"same revision {d.revision} and generation {d.generation}, different content: the "
        "source's revision does not cover every field, or the transform changed without a "
        "new generation"
    )


def evidence(d: Doc, held: Any) -> dict[str, Any]:
    def doc(value: Any) -> Any:
        if value is None or isinstance(value, dict):
            return value
        return json.loads(value)

    return {
        "incoming": {"revision": d.revision, "generation": d.generation, "doc": doc(d.doc)},
        "held": {
            "revision": int(held.revision),
            "generation": held.generation,
            "deleted": bool(held.deleted),
            "doc": doc(held.doc),
        },
    }
