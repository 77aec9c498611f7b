"""A batch the outcome ledger confirms whole is read and compared as the store writes it
(sync/known.py): a resync into PostgreSQL reads no manifest key and makes no document
per key (`next_batch`: the confirming rows' CSV text, COPYed into the probe as it is),
and the recorder compares a batch's documents with its range's rows as one text
(`read` with docs) -- with the same verdicts, rows and attempts per key as before, and
the long way whenever a key is not confirmed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import feedledger as fl
from feedledger.config import Workspace
from feedledger.model.destination import TOMBSTONE_HASH
from feedledger.sync import known as known_rows
from feedledger.sync import rebuild as rebuild_mod
from feedledger.sync import state as sync_state
from feedledger.sync.known import Confirmed, Known
from feedledger.sync.state import Outcome
from feedledger.sync.transform import Doc
from helpers import Cli
from sync.guard_destinations import SRC, declare, supplier_day
from sync.outcome_rows import destination_sql, outcome_rows, run, store_scope

# ids whose keys hold what CSV and COPY must quote or escape
IDS = [f'V-{i} "q",\\ é{i}' for i in range(10)]


@pytest.fixture
def rebuilt(cli: Cli, tmp_path: Path, place: tuple[str, str, str]) -> Cli:
    cli("source", "add", SRC, "--key", "id")
    supplier_day(cli, tmp_path, "2026-08-01", [[i, "1", f"supplier {i}"] for i in IDS])
    declare(cli, place)
    cli("manifest", "create", "all", "--source", SRC)
    assert run(cli) == {"accepted": len(IDS)}
    return cli


def test_a_confirmed_resync_reads_no_manifest_key_and_records_every_key(
    rebuilt: Cli, place: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = rebuilt
    read: list[int] = []
    real = rebuild_mod.manifests.keys

    def counted(*args: Any, **kwargs: Any) -> list[str]:
        got = real(*args, **kwargs)
        read.append(len(got))
        return got

    monkeypatch.setattr(rebuild_mod.manifests, "keys", counted)
    assert run(cli) == {"already_current": len(IDS)}
    if place[0] == "postgres":
        assert sum(read) == 0  # every batch its confirming rows
    else:
        assert sum(read) == len(IDS)  # SQLite is never probed
    rows = outcome_rows(cli)
    assert set(rows) == set(IDS)
    assert {(r[0], r[3]) for r in rows.values()} == {("already_current", 2)}
    assert cli.json("reconcile", "search", "--manifest", "all")["complete"] is True


def test_a_key_not_confirmed_sends_its_batch_the_long_way(
    rebuilt: Cli, place: tuple[str, str, str]
) -> None:
    cli = rebuilt
    with fl.open(cli.ws.config_path) as ledger:
        store = ledger.context.store
        scope = store_scope(store, "all")
        with store.begin() as conn:
            conn.execute(
                text(
                    "UPDATE sync_outcomes SET verdict = 'unresolved' WHERE scope = :s AND key = :k"
                ),
                {"s": scope, "k": json.dumps([IDS[5]])},
            )
    assert run(cli) == {"already_current": len(IDS)}
    rows = outcome_rows(cli)
    assert rows[IDS[5]][0] == "already_current" and rows[IDS[5]][3] == 2
    assert {r[0] for r in rows.values()} == {"already_current"}


def test_a_lost_table_is_rebuilt_from_confirmed_batches(
    rebuilt: Cli, place: tuple[str, str, str]
) -> None:
    cli = rebuilt
    destination_sql(place, "DELETE FROM {table}")
    assert run(cli) == {"accepted": len(IDS)}
    assert {(r[0], r[3]) for r in outcome_rows(cli).values()} == {("accepted", 2)}
    assert cli.json("reconcile", "search", "--manifest", "all")["complete"] is True


def _docs(keys: list[str], tomb: set[int] | None = None) -> list[Doc]:
    tomb = tomb or set()
    return [
        Doc(
            json.dumps([k]),
            100 + i,
            "M-1",
            7,
            TOMBSTONE_HASH if i in tomb else f"h{i:031d}",
            i in tomb,
            None if i in tomb else "{}",
        )
        for i, k in enumerate(sorted(keys))
    ]


def _manifest(store: Any, scope: str, docs: list[Doc]) -> None:
    with store.begin() as conn:
        conn.execute(
            text("INSERT INTO manifest_keys (manifest_id, key) VALUES (:m, :k)"),
            [{"m": scope, "k": d.key} for d in docs],
        )


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=12, unique=True))
def test_confirmed_rows_read_as_text_are_the_recorded_documents(
    workspace: Workspace, keys: list[str]
) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        scope = f"m{abs(hash(tuple(keys)))}"
        docs = sorted(_docs(keys), key=lambda d: d.key)
        _manifest(store, scope, docs)
        sync_state.record(store, "d", scope, Outcome([("accepted", docs)]), 10)
        got = known_rows.next_batch(store, Known("d", scope, "M-1", 5, "", ""), scope, None, 50, 7)
        assert got is not None and isinstance(got.docs, Confirmed)
        assert len(got.docs) == len(docs)
        made = sorted(got.docs, key=lambda d: d.key)
        assert made == [d._replace(doc=None) for d in docs]
        assert {got.lo, got.hi} <= {d.key for d in docs}


def test_a_range_with_a_key_unconfirmed_is_no_confirmed_batch(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        docs = _docs([f"K-{i:02d}" for i in range(6)], tomb={2})
        _manifest(store, "m", docs)
        sync_state.record(store, "d", "m", Outcome([("accepted", docs[:3] + docs[4:])]), 10)
        whole = known_rows.next_batch(store, Known("d", "m", "M-1", 5, "", ""), "m", None, 6, 7)
        assert whole is None  # K-03 has no row: the manifest counts one key more
        first = known_rows.next_batch(store, Known("d", "m", "M-1", 5, "", ""), "m", None, 3, 7)
        assert first is not None and first.docs is not None
        assert list(first.docs) == [d._replace(doc=None) for d in docs[:3]]
        assert first.docs[2].deleted is True  # a tombstone: by its recorded hash
        later = known_rows.next_batch(store, Known("d", "m", "M-1", 11, "", ""), "m", None, 3, 7)
        assert later is None  # recorded before `since`


def test_a_group_equal_to_its_rows_is_compared_as_one_text(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        docs = _docs([f'K-{i:02d},"x"' for i in range(8)])
        sync_state.record(store, "d", "m", Outcome([("accepted", docs)]), 10)
        k = known_rows.read(store, Known("d", "m", "M-1", 5, docs[0].key, docs[-1].key), None, docs)
        assert k.docs is docs and k.rows == {}
        other = [*docs[:-1], docs[-1]._replace(content_hash="other")]
        k = known_rows.read(
            store, Known("d", "m", "M-1", 5, docs[0].key, docs[-1].key), None, other
        )
        assert k.docs is None and len(k.rows) == 8  # read one by one
        same, rest = known_rows.confirmed(k, other)
        assert len(same) == 7 and [d.key for d in rest] == [docs[-1].key]
