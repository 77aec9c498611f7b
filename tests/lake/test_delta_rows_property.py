"""`lake.rows.changed`, the rows an incremental export writes, as a property (hypothesis):
for any history of commits -- versions recorded in any valid-time order (backfills),
retractions of earlier commits -- and any two positions K1 < K2, the table exported at
K1 with the rows `changed` gives for (K1, K2] upserted into it (by version id) equals
the table exported whole at K2; and every standing row's valid_to is the next standing
version's valid_from of its key (the ledger's rule), a retracted row's none."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.lake.rows import changed
from feedledger.ledger.readers import history_rows

KEYS = ["a", "b", "c"]
READ = history_rows.DECODED  # what the export reads

# a commit: ("add", [(key, valid_day)...]) or ("retract", index of an earlier commit)
commit = st.one_of(
    st.tuples(
        st.just("add"),
        st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 6)), min_size=1, max_size=3),
    ),
    st.tuples(st.just("retract"), st.integers(0, 20)),
)


def history(commits: list[Any]) -> list[dict[str, Any]]:
    """The versions rows the commits leave (commit i at transaction time 10*(i+1))."""
    rows: list[dict[str, Any]] = []
    for i, (kind, what) in enumerate(commits):
        at = 10 * (i + 1)
        if kind == "add":
            seen: set[str] = set()
            for key, day in what:
                if key in seen:  # one version per key and payload
                    continue
                seen.add(key)
                rows.append(
                    {"version_id": len(rows) + 1, "key": key, "valid_from": day * 1000,
                     "recorded_at": at, "txn_seq": i + 1, "retracted_at": None,
                     "run_id": f"r{i}", "payload_id": f"p{i}", "backfill": False,
                     "deleted": False, "change": 0, "revision": None,
                     "attributes": "{}", "geometry": None}
                )  # fmt: skip
        elif what < i:
            for r in rows:
                if r["txn_seq"] == what + 1 and r["retracted_at"] is None:
                    r["retracted_at"] = at
    return rows


def known_at(rows: list[dict[str, Any]], k: int, keys: set[str] | None = None) -> pa.Table:
    """What `history_rows.versions_of` reads at K (of `keys`)."""
    got = []
    for r in rows:
        if r["recorded_at"] > k or (keys is not None and r["key"] not in keys):
            continue
        seen = dict(r)
        if seen["retracted_at"] is not None and seen["retracted_at"] > k:
            seen["retracted_at"] = None
        got.append(seen)
    return pa.Table.from_pylist(got, schema=READ)


def by_id(table: pa.Table) -> dict[int, tuple[Any, Any]]:
    return {r["version_id"]: (r["valid_to"], r["retracted_at"]) for r in table.to_pylist()}


@settings(max_examples=200, deadline=None)
@given(st.lists(commit, min_size=1, max_size=8), st.data())
def test_incremental_rows_make_the_whole_export(commits: list[Any], data: Any) -> None:
    rows = history(commits)
    times = [10 * (i + 1) for i in range(len(commits))]
    k1 = data.draw(st.sampled_from([0, *times]))
    k2 = data.draw(st.sampled_from([t for t in times if t >= k1] or [k1]))
    whole_then = by_id(changed(known_at(rows, k1), None))
    touched = {
        r["key"]
        for r in rows
        if k1 < r["recorded_at"] <= k2
        or (r["retracted_at"] is not None and k1 < r["retracted_at"] <= k2)
    }
    step = changed(known_at(rows, k2, touched), k1)
    for r in step.to_pylist():
        whole_then[r["version_id"]] = (r["valid_to"], r["retracted_at"])
    whole_now = changed(known_at(rows, k2), None)
    assert whole_then == by_id(whole_now)
    # the ledger's rule for valid_to
    table = whole_now.to_pylist()
    for key in KEYS:
        mine = sorted(
            (r for r in table if r["key"] == key), key=lambda r: (r["valid_from"], r["txn_seq"])
        )
        standing = [r for r in mine if r["retracted_at"] is None]
        for i, r in enumerate(standing):
            nxt = standing[i + 1]["valid_from"] if i + 1 < len(standing) else None
            assert r["valid_to"] == nxt
        assert all(r["valid_to"] is None for r in mine if r["retracted_at"] is not None)
