"""A payload diffed against an empty state (diff/first_load.py, the path `compute`
takes for a source's first load) equals the reference diff: keys in any order, delete
markers, revisions or none, both payload kinds; its one-value columns are constant
columns (never a value a row), and a payload already in key order is not copied."""

from __future__ import annotations

from typing import Any
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff.diff_reference import reference_compute
from feedledger.diff import compute, empty_state
from feedledger.diff.first_load import against_nothing
from feedledger.model.types import PayloadKind

REVS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "2026-08-01", "b"]))
ROW = st.tuples(st.integers(0, 3), REVS, st.one_of(st.none(), st.booleans()))
rows = st.dictionaries(st.integers(0, 60).map(lambda i: f'["k{i}"]'), ROW, max_size=40)


def _obs(found: dict[str, tuple[int, str | None, bool | None]], markers: bool) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "idx": list(range(len(found))),
            "key": list(found),
            "hash": [h for h, _r, _d in found.values()],
            "revision": [r for _h, r, _d in found.values()],
            "deleted": [d if markers else False for _h, _r, d in found.values()],
        },
        schema={
            "idx": pl.UInt32,
            "key": pl.String,
            "hash": pl.Int64,
            "revision": pl.String,
            "deleted": pl.Boolean,
        },
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    obs=rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
    no_revisions=st.booleans(),
    sort=st.booleans(),
)
def test_first_load_equals_the_reference_diff(
    obs: dict[str, Any], kind: PayloadKind, use_revision: bool, no_revisions: bool, sort: bool
) -> None:
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    if no_revisions:
        o = o.with_columns(pl.lit(None, dtype=pl.String).alias("revision"))
    if sort:  # a payload exported in key order (its idx still its row numbers)
        o = o.sort("key").with_columns(pl.int_range(o.height, dtype=pl.UInt32).alias("idx"))
    expected = reference_compute(o, empty_state(), kind=kind, use_revision=use_revision)
    got = compute(o, empty_state(), kind=kind, use_revision=use_revision)
    assert got.counts == expected.counts
    assert got.versions.equals(expected.versions), (got.versions, expected.versions)
    assert got.versions.schema == expected.versions.schema
    assert got.outcomes.equals(expected.outcomes), (got.outcomes, expected.outcomes)
    assert got.outcomes.schema == expected.outcomes.schema


def test_one_value_columns_are_not_materialised() -> None:
    n = 200_000
    o = pl.DataFrame(
        {
            "idx": pl.int_range(n, dtype=pl.UInt32, eager=True),
            "key": pl.int_range(n, eager=True).cast(pl.String).str.zfill(8),
            "hash": pl.int_range(n, eager=True),
            "revision": pl.repeat(None, n, dtype=pl.String, eager=True),
            "deleted": pl.repeat(False, n, dtype=pl.Boolean, eager=True),
        }
    )
    versions, outcomes, counts = against_nothing([o])
    assert counts["added"] == n and outcomes.is_empty()
    # key (a view), hash, idx: ~28 bytes a row; change, deleted, revision and
    # prev_version_id held as one value each
    assert versions.estimated_size() < 30 * n
    assert versions.get_column("change").unique().to_list() == ["added"]
    assert versions.get_column("prev_version_id").null_count() == n


def test_a_payload_in_key_order_is_not_copied() -> None:
    keys = pl.Series("key", [f"P{i:08d}" for i in range(1000)])
    o = pl.DataFrame(
        {
            "idx": pl.int_range(1000, dtype=pl.UInt32, eager=True),
            "key": keys,
            "hash": pl.int_range(1000, eager=True),
            "revision": pl.repeat(None, 1000, dtype=pl.String, eager=True),
            "deleted": pl.repeat(False, 1000, dtype=pl.Boolean, eager=True),
        }
    )
    with mock.patch.object(pl.Series, "gather", side_effect=AssertionError("gathered")):
        versions, _outcomes, _counts = against_nothing(o)
    assert versions.get_column("key").equals(keys)
    # out of order: gathered into key order
    versions, _outcomes, _counts = against_nothing(o.reverse())
    assert versions.get_column("key").equals(keys)
    assert versions.get_column("idx").to_list() == list(range(1000))  # each with its row
