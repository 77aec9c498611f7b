"""Under a budget the diff and the next state read the current state from its cache
file a key-hash partition at a time (ledger/stateparts.py, pipeline/intake/bounded.py): the
diff equals the whole `compute`, and the next state, written again in partitions,
equals `next_state` of the whole, whatever the file's partitions and the diff's
(most tiny or empty), with key hashes forced to collide."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diff.frames import observation_frame as _obs
from diff.frames import state_frame as _state
from example_budget import examples
from feedledger import config
from feedledger.diff import STATE_SCHEMA, compute, next_state
from feedledger.diff.partitioned import part, partition_of
from feedledger.ledger.stateparts import StateParts, open_stored, write_parts
from feedledger.model import hashing
from feedledger.model.hashing import with_key_hash
from feedledger.model.types import PayloadKind
from feedledger.pipeline.intake import bounded

KEYS = [f'["k{i}"]' for i in range(30)]
REVS = st.one_of(st.none(), st.sampled_from(["1", "2", "10", "b"]))
ROW = st.tuples(st.integers(0, 3), REVS, st.booleans())  # hash, revision, deleted/marker
rows = st.dictionaries(st.sampled_from(KEYS), ROW, max_size=len(KEYS))


def _degenerate(buckets: int) -> Any:
    """A key hash with only `buckets` values, a function of the key (as the real one
    is): many keys collide, in the payload, in the state and between them."""

    def expr(key: pl.Expr) -> pl.Expr:
        return key.str.extract(r"(\d+)").cast(pl.Int64) % buckets

    return expr


def _stored_file(path: Path, state: pl.DataFrame, partitions: int) -> Path:
    hashed = with_key_hash(state)
    write_parts(
        path, StateParts((part(hashed, partitions, p) for p in range(partitions)), partitions)
    )
    return path


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=rows,
    obs=rows,
    kind=st.sampled_from(list(PayloadKind)),
    use_revision=st.booleans(),
    stored_parts=st.integers(1, 5),
    parts=st.integers(2, 9),
    buckets=st.one_of(st.none(), st.integers(1, 4)),
)
def test_a_diff_read_from_stored_partitions_equals_the_whole_diff(
    state: dict[str, Any],
    obs: dict[str, Any],
    kind: PayloadKind,
    use_revision: bool,
    stored_parts: int,
    parts: int,
    buckets: int | None,
) -> None:
    s = _state(state)
    if s.is_empty():
        return  # a first load reads no state
    o = _obs(obs, markers=kind == PayloadKind.CHANGES)
    src = config.make_source(
        "s", key=("id",), kind=kind, revision="rev" if use_revision else None, memory_budget="1GiB"
    )
    expected = compute(o, s, kind=kind, use_revision=use_revision)
    versions = expected.versions.with_columns(
        (pl.int_range(expected.versions.height, dtype=pl.Int64) + 1000).alias("version_id")
    )
    degenerate = (
        mock.patch.object(hashing, "hash_expr", _degenerate(buckets))
        if buckets is not None
        else contextlib.nullcontext()
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        degenerate,
        mock.patch.object(bounded, "partitions", lambda *_a: parts),
    ):
        stored = open_stored(_stored_file(Path(tmp) / "state.arrow", s, stored_parts))
        assert stored is not None and stored.partitions == stored_parts
        total = bounded.stored_partitions(parts, stored)
        assert total % stored_parts == 0 and total >= parts
        got = bounded.diff(src, [o], s, stored)
        assert got.counts == expected.counts
        assert got.versions.equals(expected.versions), (got.versions, expected.versions)
        assert got.outcomes.equals(expected.outcomes), (got.outcomes, expected.outcomes)
        after = bounded.next_state(src, o.height, s, versions, None, stored)
        assert isinstance(after, StateParts) and after.partitions == total
        path = Path(tmp) / "next.arrow"
        write_parts(path, after)
        again = open_stored(path)
        assert again is not None and again.partitions == total
        read = pl.concat([again.read(p) for p in range(total)])
        assert read.schema == STATE_SCHEMA
        assert read.sort("key").equals(next_state(s, versions).sort("key"))
        # every partition holds exactly its keys
        for p in range(total):
            rows = with_key_hash(again.read(p))
            assert rows.select(partition_of(total) == p).to_series().all()


def test_a_file_written_whole_or_unreadable_is_not_read_in_partitions(tmp_path: Path) -> None:
    state = _state({k: (1, None, False) for k in KEYS})
    whole = tmp_path / "whole.arrow"
    write_parts(whole, iter([state]))
    assert open_stored(whole) is None
    assert open_stored(tmp_path / "missing.arrow") is None
    (tmp_path / "junk.arrow").write_bytes(b"not arrow")
    assert open_stored(tmp_path / "junk.arrow") is None
    parted = _stored_file(tmp_path / "parted.arrow", state, 4)
    stored = open_stored(parted)
    assert stored is not None and stored.partitions == 4
    assert sum(stored.read(p).height for p in range(4)) == len(KEYS)
