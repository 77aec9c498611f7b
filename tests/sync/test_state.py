"""The outcome ledger records a guarded batch's verdicts one row per key, whether they
come one by one or as groups of documents sharing a plain verdict (one statement per
group), and a retry replaces a key's row (its attempts counted), never adds one."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event

import feedledger as fl
from feedledger.config import Workspace
from feedledger.sync import state as sync_state
from feedledger.sync.state import Outcome, Verdict
from feedledger.sync.transform import Doc

BIG = 1_780_000_000_000_000  # a revision from a timestamp field, in microseconds


def _doc(i: int, revision: int = 1, gen: str = "M-1") -> Doc:
    key = json.dumps([f"K-{i:03d}", 'Zürich "quoted" \\ ✓'], ensure_ascii=False)
    return Doc(key, revision, gen, 1, f"hash-{i}-{revision}", False, "{}")


def _rows(store: Any, destination: str, scope: str) -> dict[str, tuple[Any, ...]]:
    with store.engine.connect() as conn:
        got = conn.exec_driver_sql(
            "SELECT key, verdict, revision, generation, content_hash, reason, evidence, "
            "attempts, at FROM sync_outcomes WHERE destination = "
            + ("%(d)s AND scope = %(s)s" if store.dialect == "postgresql" else ":d AND scope = :s"),
            {"d": destination, "s": scope},
        ).all()
    return {r[0]: tuple(r[1:]) for r in got}


def test_groups_and_single_verdicts_are_one_row_per_key(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        written = [_doc(i, BIG + i) for i in range(30)]
        current = [_doc(i) for i in range(30, 40)]
        odd = Verdict(_doc(40).key, "unresolved", 3, "M-1", "h40", "same revision",
                      {"held": {"doc": {"a": 1}}})  # fmt: skip
        refused = Verdict(_doc(41).key, "rejected", None, "M-1", None, "not in the ledger")
        outcome = Outcome([("accepted", written), ("already_current", current)], [odd])
        assert len(outcome) == 41
        assert outcome.plus([refused]).tally() == {
            "accepted": 30, "already_current": 10, "unresolved": 1, "rejected": 1
        }  # fmt: skip
        assert [v.key for v in outcome] == [d.key for d in written + current] + [odd.key]

        sent: list[str] = []

        def capture(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
            sent.append(statement)

        event.listen(store.engine, "before_cursor_execute", capture)
        try:
            sync_state.record(store, "d", "m1", outcome.plus([refused]), 100)
        finally:
            event.remove(store.engine, "before_cursor_execute", capture)
        # a group is one statement whatever its size; the others one executemany
        assert sum("INSERT INTO sync_outcomes" in s for s in sent) == 3, sent

        rows = _rows(store, "d", "m1")
        assert len(rows) == 42
        for i, d in enumerate(written):
            assert rows[d.key] == ("accepted", BIG + i, "M-1", d.content_hash, None, None, 1, 100)
        for d in current:
            assert rows[d.key] == ("already_current", 1, "M-1", d.content_hash, None, None, 1, 100)
        assert rows[odd.key][:5] == ("unresolved", 3, "M-1", "h40", "same revision")
        assert json.loads(rows[odd.key][5]) == {"held": {"doc": {"a": 1}}}
        assert rows[refused.key] == (
            "rejected",
            None,
            "M-1",
            None,
            "not in the ledger",
            None,
            1,
            100,
        )
        assert sync_state.counts(store, "d", "m1") == {
            "accepted": 30, "already_current": 10, "superseded": 0, "rejected": 1,
            "unresolved": 1,
        }  # fmt: skip

        # a retry: every key's row replaced (reason and evidence too), attempts counted
        again = [_doc(i, BIG + i) for i in range(30)] + current + [_doc(40, 3), _doc(41)]
        sync_state.record(store, "d", "m1", Outcome([("already_current", again)]), 200)
        rows = _rows(store, "d", "m1")
        assert len(rows) == 42
        assert {r[0] for r in rows.values()} == {"already_current"}
        assert {(r[4], r[5], r[6], r[7]) for r in rows.values()} == {(None, None, 2, 200)}
        assert rows[written[7].key][1] == BIG + 7
        # another scope, another destination: rows of their own
        sync_state.record(store, "d", "live", Outcome([("accepted", current[:2])]), 300)
        sync_state.record(store, "e", "m1", Outcome([("accepted", current[:3])]), 300)
        assert len(_rows(store, "d", "live")) == 2 and len(_rows(store, "e", "m1")) == 3
        assert len(_rows(store, "d", "m1")) == 42


def test_a_group_larger_than_one_statement_is_recorded_whole(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        n = sync_state.GROUP_ROWS + 7
        docs = [Doc(json.dumps([i]), i, "M-2", 2, f"h{i}", False, "{}") for i in range(n)]
        sync_state.record(store, "d", "m", Outcome([("accepted", docs)]), 5, acknowledged=None)
        assert sync_state.counts(store, "d", "m")["accepted"] == n
        [last] = sync_state.verdicts_for(store, "d", [json.dumps([n - 1])])
        assert (last["verdict"], last["revision"], last["generation"]) == ("accepted", n - 1, "M-2")
