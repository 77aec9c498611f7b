"""Key-ordered payloads and states are paired by position (feedledger.diff.aligned), not
joined: the same rows as a left join on the key text, and `compute` through that path
equals the reference formulation (tests/diff/diff_reference.py), across many anchor
blocks, shifts inside blocks (tombstones, deletions, new keys) and revisions."""

from __future__ import annotations

from typing import Any
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff.diff_reference import reference_compute
from feedledger.diff import STATE_SCHEMA, aligned, compute, next_state
from feedledger.model.types import PayloadKind

KEYS = [f'["k{i:03d}"]' for i in range(80)]
REVS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "2026-08-01", "b"]))
rows = st.dictionaries(
    st.sampled_from(KEYS), st.tuples(st.integers(0, 3), REVS, st.booleans()), max_size=len(KEYS)
)


def _state(found: dict[str, tuple[int, str | None, bool]]) -> pl.DataFrame:
    keys = sorted(found)
    return pl.DataFrame(
        {
            "key": keys,
            "version_id": [100 + i for i in range(len(keys))],
            "hash": [found[k][0] for k in keys],
            "revision": [found[k][1] for k in keys],
            "deleted": [found[k][2] for k in keys],
        },
        schema=STATE_SCHEMA,
    )


def _obs(found: dict[str, tuple[int, str | None, bool]], markers: bool) -> pl.DataFrame:
    keys = sorted(found)
    return pl.DataFrame(
        {
            "idx": list(range(len(keys))),
            "key": keys,
            "hash": [found[k][0] for k in keys],
            "revision": [found[k][1] for k in keys],
            "deleted": [found[k][2] and markers for k in keys],
        },
        schema={
            "idx": pl.UInt32,
            "key": pl.String,
            "hash": pl.Int64,
            "revision": pl.String,
            "deleted": pl.Boolean,
        },
    )


def _joined_rows(keys: list[str], state_keys: list[str]) -> list[int | None]:
    at = {k: i for i, k in enumerate(state_keys)}
    return [at.get(k) for k in keys]


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.sampled_from(KEYS), unique=True),
    state_keys=st.lists(st.sampled_from(KEYS), unique=True, min_size=1),
    step=st.integers(1, 9),
)
def test_sorted_keys_are_paired_as_a_join_on_the_text_pairs_them(
    keys: list[str], state_keys: list[str], step: int
) -> None:
    keys, state_keys = sorted(keys), sorted(state_keys)
    got = aligned.sorted_rows(pl.Series(keys, dtype=pl.String), pl.Series(state_keys), step)
    if not keys:
        assert got is None
        return
    assert got is not None and got.dtype == pl.UInt32
    assert got.to_list() == _joined_rows(keys, state_keys)


def test_keys_out_of_order_are_left_to_the_join() -> None:
    ordered = pl.Series(['["a"]', '["b"]', '["c"]'])
    shuffled = pl.Series(['["b"]', '["a"]', '["c"]'])
    assert aligned.sorted_rows(shuffled, ordered) is None
    assert aligned.sorted_rows(ordered, shuffled) is None
    assert aligned.sorted_rows(ordered, pl.Series(['["a"]', None])) is None


def test_a_long_payload_with_scattered_shifts_finds_every_row() -> None:
    """Thousands of rows, a shift every few rows (keys the state holds and the payload
    skips, keys new to the state), with the default anchor spacing."""
    state_keys = [f'["p{i:06d}"]' for i in range(0, 30_000, 1) if i % 7]
    keys = [f'["p{i:06d}"]' for i in range(0, 30_000, 1) if i % 5]
    got = aligned.sorted_rows(pl.Series(keys), pl.Series(state_keys))
    assert got is not None
    assert got.to_list() == _joined_rows(keys, state_keys)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=rows,
    obs=rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
    step=st.integers(1, 9),
)
def test_compute_on_key_ordered_frames_equals_reference(
    state: dict[str, Any], obs: dict[str, Any], kind: PayloadKind, use_revision: bool, step: int
) -> None:
    s = _state(state)
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    expected = reference_compute(o, s, kind=kind, use_revision=use_revision)
    with mock.patch.object(aligned, "ANCHOR_EVERY", step):
        got = compute(o, s, kind=kind, use_revision=use_revision)
    assert got.counts == expected.counts
    assert got.versions.equals(expected.versions), (got.versions, expected.versions)
    assert got.outcomes.equals(expected.outcomes), (got.outcomes, expected.outcomes)
    # the rows the in-place next state writes: each version's key's row in the state
    assert got.state_rows is not None
    at = {k: i for i, k in enumerate(s.get_column("key").to_list())}
    assert got.state_rows.to_list() == [at.get(k) for k in got.versions.get_column("key")]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=rows, obs=rows, kind=st.sampled_from(list(PayloadKind)))
def test_a_key_ordered_state_stays_in_key_order_with_new_keys_among_the_old(
    state: dict[str, Any], obs: dict[str, Any], kind: PayloadKind
) -> None:
    """New keys that sort among the state's are put in their places (not after the
    state's rows): the next day is paired by position again; the rows are the joined
    next state's, and the state diffed against is left as it was."""
    s = _state(state)
    before = s.clone()
    d = compute(_obs(obs, markers=kind == PayloadKind.CHANGES), s, kind=kind, use_revision=False)
    versions = d.versions.with_columns(
        pl.int_range(d.versions.height, dtype=pl.Int64).alias("version_id") + 1000
    )
    patched = next_state(s, versions, d.state_rows)
    assert patched.schema == STATE_SCHEMA
    assert patched.get_column("key").is_sorted()
    assert patched.equals(next_state(s, versions).sort("key"))
    assert s.equals(before)


def test_a_state_out_of_key_order_gets_its_new_keys_after_its_rows() -> None:
    s = _state({'["b"]': (1, None, False), '["a"]': (2, None, False)})
    s = s.sort("key", descending=True)
    fresh = _state({'["0"]': (3, None, False)})
    assert aligned.with_new_keys(s, fresh).get_column("key").to_list() == [
        '["b"]',
        '["a"]',
        '["0"]',
    ]
