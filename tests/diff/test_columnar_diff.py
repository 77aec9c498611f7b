"""The columnar diff (feedledger.diff.compute) equals the reference formulation
(tests/diff/diff_reference.py) on random states and payloads: revisions, tombstones, delete
markers, both payload kinds, and key-hash collisions forced by a degenerate `kh`."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff.diff_reference import reference_compute
from diff.frames import observation_frame as _obs
from diff.frames import state_frame as _state
from feedledger.diff import STATE_SCHEMA, aligned, compute, next_state
from feedledger.model.types import PayloadKind

KEYS = [f'["k{i}"]' for i in range(12)]
REVS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "2026-08-01", "b"]))

state_rows = st.dictionaries(
    st.sampled_from(KEYS),
    st.tuples(st.integers(0, 3), REVS, st.booleans()),  # hash, revision, deleted
    max_size=len(KEYS),
)
obs_rows = st.dictionaries(
    st.sampled_from(KEYS),
    st.tuples(st.integers(0, 3), REVS, st.booleans()),  # hash, revision, delete marker
    max_size=len(KEYS),
)


def _collide(frame: pl.DataFrame) -> pl.DataFrame:
    """Give every key the same key hash (the diff must notice and join on the text)."""
    return frame.with_columns(pl.lit(7, dtype=pl.Int64).alias("kh"))


def _same(a: Any, b: Any) -> None:
    assert a.counts == b.counts
    assert a.versions.equals(b.versions), (a.versions, b.versions)
    assert a.outcomes.equals(b.outcomes), (a.outcomes, b.outcomes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=state_rows,
    obs=obs_rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
    collide=st.sampled_from(["none", "obs", "state", "both"]),
)
def test_compute_equals_reference(
    state: dict[str, Any], obs: dict[str, Any], kind: PayloadKind, use_revision: bool, collide: str
) -> None:
    s = _state(state)
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    if collide in ("obs", "both"):
        o = _collide(o)
    if collide in ("state", "both"):
        s = _collide(s)
    if collide == "obs" and o.height > 1:
        return  # observations' keys are unique, so their hashes are checked unique upstream
    expected = reference_compute(o, s, kind=kind, use_revision=use_revision)
    # a forced key hash is the hash join's concern: frames in key order would otherwise
    # be paired by position on the text (diff/aligned.py, tests/diff/test_sorted_diff.py)
    joined = mock.patch.object(aligned, "sorted_rows", lambda *_a: None)
    with joined if collide != "none" else nullcontext():
        got = compute(o, s, kind=kind, use_revision=use_revision)
    _same(got, expected)


def test_collision_between_payload_and_state_is_joined_on_text() -> None:
    s = _state({'["a"]': (1, None, False), '["b"]': (2, None, False)})
    o = _obs({'["c"]': (3, None, False), '["a"]': (1, None, False)}, markers=False)
    # "c" (new) shares its key hash with "b" (absent from the payload: to be deleted)
    s = s.with_columns(pl.Series("kh", [1, 2], dtype=pl.Int64))
    o = o.with_columns(pl.Series("kh", [2, 1], dtype=pl.Int64))
    got = compute(o, s, kind=PayloadKind.SNAPSHOT, use_revision=False)
    assert got.versions.select("key", "change").rows() == [('["b"]', "deleted"), ('["c"]', "added")]
    _same(got, reference_compute(o, s, kind=PayloadKind.SNAPSHOT, use_revision=False))


def test_next_state_applies_versions() -> None:
    s = _state({'["a"]': (1, None, False), '["b"]': (2, None, False)})
    o = _obs({'["a"]': (5, None, False), '["c"]': (3, None, False)}, markers=False)
    d = compute(o, s, kind=PayloadKind.SNAPSHOT, use_revision=False)
    versions = d.versions.with_columns(
        pl.int_range(d.versions.height, dtype=pl.Int64).alias("version_id") + 1000
    )
    nxt = next_state(s, versions).sort("key")
    assert nxt.select("key", "hash", "deleted").rows() == [
        ('["a"]', 5, False),
        ('["b"]', 2, True),
        ('["c"]', 3, False),
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=state_rows,
    obs=obs_rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
)
def test_next_state_written_in_place_equals_the_joined_one(
    state: dict[str, Any], obs: dict[str, Any], kind: PayloadKind, use_revision: bool
) -> None:
    """The versions' state rows (`DiffResult.state_rows`) patch the state in place: the
    same rows as looking every key up, and the state diffed against is left as it was
    (a resident process keeps it warm)."""
    s = _state(state)
    before = s.clone()
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    d = compute(o, s, kind=kind, use_revision=use_revision)
    assert d.state_rows is not None and d.state_rows.len() == d.versions.height
    versions = d.versions.with_columns(
        pl.int_range(d.versions.height, dtype=pl.Int64).alias("version_id") + 1000
    )
    joined = next_state(s, versions).sort("key")
    patched = next_state(s, versions, d.state_rows)
    assert patched.schema == STATE_SCHEMA
    assert patched.sort("key").equals(joined)
    assert s.equals(before)
