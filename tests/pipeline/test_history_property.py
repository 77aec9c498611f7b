"""Property tests: random payload sequences (snapshot and changes), with random
interruption points, end with exactly the history a naive model predicts and the same
history as one uninterrupted run. SQLite and PostgreSQL."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from example_budget import examples
from feedledger import faults
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import queries
from feedledger.pipeline.intake.ingest import ingest
from feedledger.pipeline.verify import verify
from pipeline.history_model import KEYS, Payload, csv_bytes, day, expected_history, fresh_workspace

payloads = st.lists(
    st.dictionaries(
        st.sampled_from(KEYS), st.sampled_from(["1", "2", "", "x,y", 'q"']), max_size=len(KEYS)
    ),
    min_size=1,
    max_size=6,
)


def ledger_history(ws: Workspace, seq_len: int) -> dict[str, list[tuple[int, str | None]]]:
    import json

    day0 = 1_785_542_400_000_000  # 2026-08-01T00:00Z
    out: dict[str, list[tuple[int, str | None]]] = {}
    with Context(ws) as ctx:
        for k in KEYS:
            for v in queries.history(ctx.store, "s", json.dumps([k])):
                idx = (v.valid_from - day0) // 86_400_000_000
                value = None if v.deleted else json.loads(v.attributes or "{}")["v"]
                out.setdefault(k, []).append((idx, value))
        assert verify(ctx, "s")["ok"]
    return out


def run_sequence(ws: Workspace, seq: list[Payload], fail_at: tuple[int, str] | None) -> None:
    for i, p in enumerate(seq):
        if fail_at and fail_at[0] == i:
            os.environ[faults.ENV] = fail_at[1]
            try:
                with Context(ws) as ctx, pytest.raises(faults.InjectedFailure):
                    ingest(ctx, "s", csv_bytes(p), published_at=day(i))
            finally:
                del os.environ[faults.ENV]
        with Context(ws) as ctx:  # the rerun (or the normal run)
            ingest(ctx, "s", csv_bytes(p), published_at=day(i))


POINTS = ["after_archive", "after_register", "mid_transaction", "before_commit", "after_commit"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seq=payloads, data=st.data())
def test_random_sequences_with_interruptions_match_model(
    backend: str, seq: list[Payload], data: st.DataObject
) -> None:
    fail_at = None
    if data.draw(st.booleans()):
        fail_at = (data.draw(st.integers(0, len(seq) - 1)), data.draw(st.sampled_from(POINTS)))
    with fresh_workspace(backend) as ws:
        run_sequence(ws, seq, fail_at)
        got = ledger_history(ws, len(seq))
    assert got == expected_history(seq)
