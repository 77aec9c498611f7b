"""`reconcile` right after a rebuild: the manifest keys without a verdict are found by a
statement whose plan does not hang on planner statistics. Nothing has analysed
`manifest_keys` or `sync_outcomes` then (autovacuum runs late, or is off), and
PostgreSQL planned the former anti-join as a nested loop comparing every manifest key
with every verdict (minutes at 120k keys). The plan of every statement
`sync.state.without_verdict` sends is read back with EXPLAIN on those never-analysed
tables; SQLite's too (no full scan)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event

import feedledger as fl
from feedledger.config import Workspace
from feedledger.sync import manifests
from feedledger.sync import state as sync_state
from feedledger.sync.state import Verdict

N = 5000  # enough for the nested loop to be chosen (it is, from the first rows)
UNJUDGED = {7, 2500, 4999}


def _key(i: int) -> str:
    return json.dumps([f"K-{i:05d}"])


def test_keys_without_a_verdict_are_found_without_a_nested_loop(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        keys = [_key(i) for i in range(N)]
        man = manifests.create(store, name="m", source="s", created_at=1,
                               boundary=(None, None, None), generation="M-1",
                               reconstructible=True, keys=keys, keys_from=None)  # fmt: skip
        judged = [Verdict(k, "accepted", 1, "M-1", "h") for i, k in enumerate(keys)
                  if i not in UNJUDGED]  # fmt: skip
        sync_state.record(store, "d", man.manifest_id, judged, 1)
        # verdicts of another destination and of the live route do not count
        sync_state.record(store, "other", man.manifest_id, [Verdict(_key(7), "accepted",
                          1, "M-1", "h")], 1)  # fmt: skip
        sync_state.record(store, "d", "live", [Verdict(_key(2500), "accepted", 1, "M-1", "h")], 1)

        sent: list[tuple[str, Any]] = []

        def capture(_c: Any, _cur: Any, statement: str, params: Any, *_a: Any) -> None:
            sent.append((statement, params))

        event.listen(store.engine, "before_cursor_execute", capture)
        try:
            total, first = sync_state.without_verdict(store, "d", man.manifest_id, 2)
        finally:
            event.remove(store.engine, "before_cursor_execute", capture)
        assert total == len(UNJUDGED)
        assert first == [_key(7), _key(2500)]
        assert sent
        pg = store.dialect == "postgresql"
        with store.engine.connect() as conn:
            if pg:
                tuples = conn.exec_driver_sql(
                    "SELECT relname, reltuples FROM pg_class WHERE relname IN "
                    "('manifest_keys', 'sync_outcomes') AND relnamespace = "
                    "current_schema()::regnamespace"
                ).all()
                assert all(r[1] < 0 for r in tuples), tuples  # never analysed
            for statement, params in sent:
                explain = "EXPLAIN " if pg else "EXPLAIN QUERY PLAN "
                plan = "\n".join(
                    str(r[-1]) for r in conn.exec_driver_sql(explain + statement, params)
                )
                assert "Nested Loop" not in plan, plan
                assert "SCAN manifest_keys\n" not in plan + "\n", plan
                assert "SCAN sync_outcomes\n" not in plan + "\n", plan
