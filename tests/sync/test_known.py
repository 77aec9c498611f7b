"""A rebuild repeated into a destination it was rebuilt into before uses what the outcome
ledger recorded (sync/known.py): a source without a revision field or a transform has,
per key, the document its recorded verdict names, so a resync into PostgreSQL probes
the keys by their recorded hashes without reading the versions, builds the documents
only where the destination does not hold them, and records confirmed verdicts by one
range update -- with the same verdicts, rows, attempts and evidence as key by key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import feedledger as fl
from feedledger.config import Workspace
from feedledger.sync import known as known_rows
from feedledger.sync import rebuild as rebuild_mod
from feedledger.sync import state as sync_state
from feedledger.sync.known import Known
from feedledger.sync.state import Outcome, Verdict
from feedledger.sync.transform import Doc
from helpers import Cli
from sync.guard_destinations import SRC, declare, supplier_day
from sync.outcome_rows import destination_sql, outcome_rows, run

N = 10


@pytest.fixture
def rebuilt(cli: Cli, tmp_path: Path, place: tuple[str, str, str]) -> Cli:
    """N suppliers (no revision field: the version id is the revision) rebuilt once into
    the destination, V-9 changed on the second day (its second version is its latest)."""
    cli("source", "add", SRC, "--key", "id")
    rows = [[f"V-{i}", "1", f"supplier {i}"] for i in range(N)]
    supplier_day(cli, tmp_path, "2026-08-01", rows)
    supplier_day(cli, tmp_path, "2026-08-02", [*rows[:-1], ["V-9", "2", "supplier nine"]])
    declare(cli, place)
    cli("manifest", "create", "all", "--source", SRC)
    assert run(cli) == {"accepted": N}
    return cli


def test_a_resync_probes_recorded_hashes_and_records_every_key(
    rebuilt: Cli, place: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = rebuilt
    before = outcome_rows(cli)
    assert {r[0] for r in before.values()} == {"accepted"} and len(before) == N
    reads: list[int] = []

    def counting(real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append(len(args[2]))
            return real(*args, **kwargs)

        return counted

    # the versions read: key by key (`latest`), or a batch's default documents' rows
    monkeypatch.setattr(rebuild_mod, "latest", counting(rebuild_mod.latest))
    monkeypatch.setattr(rebuild_mod, "latest_texts", counting(rebuild_mod.latest_texts))
    assert run(cli) == {"already_current": N}
    if place[0] == "postgres":
        assert reads == []  # no version read: every key probed by its recorded hash
    else:
        assert sum(reads) == N
    after = outcome_rows(cli)
    for key, (verdict, revision, chash, attempts) in after.items():
        assert (verdict, revision, chash, attempts) == (
            "already_current", before[key][1], before[key][2], 2
        )  # fmt: skip
    assert run(cli) == {"already_current": N}
    assert {r[3] for r in outcome_rows(cli).values()} == {3}


def test_what_the_destination_lost_or_changed_is_built_and_judged(
    rebuilt: Cli, place: tuple[str, str, str]
) -> None:
    cli = rebuilt
    destination_sql(place, "DELETE FROM {table} WHERE key = '[\"V-2\"]'")
    destination_sql(
        place, "UPDATE {table} SET content_hash = 'other' WHERE key = '[\"V-5\"]'"
    )  # the same revision and generation, other content
    assert run(cli) == {"accepted": 1, "already_current": N - 2, "unresolved": 1}
    rows = outcome_rows(cli)
    assert rows["V-2"][0] == "accepted" and rows["V-2"][3] == 2
    assert rows["V-5"][0] == "unresolved" and rows["V-5"][3] == 2
    with fl.open(cli.ws.config_path) as ledger:
        [v5] = sync_state.verdicts_for(ledger.context.store, "search", [json.dumps(["V-5"])])
    assert v5["verdict"] == "unresolved"
    assert v5["evidence"]["incoming"]["doc"] == {"id": "V-5", "name": "supplier 5", "rev": "1"}
    # the document of V-2 was built from the ledger, whole
    kind, url, table = place
    full = url.replace("postgresql://", "postgresql+psycopg://", 1) if kind == "postgres" else (
        f"sqlite:///{url}"
    )  # fmt: skip
    engine = create_engine(full)
    try:
        with engine.connect() as conn:
            got = conn.execute(
                text(f'SELECT doc FROM "{table}" WHERE key = :k'), {"k": json.dumps(["V-2"])}
            ).scalar_one()
    finally:
        engine.dispose()
    body = json.loads(got) if isinstance(got, str) else got
    assert body == {"id": "V-2", "name": "supplier 2", "rev": "1"}


def test_a_rebuild_into_a_lost_table_is_accepted_again(
    rebuilt: Cli, place: tuple[str, str, str]
) -> None:
    cli = rebuilt
    destination_sql(place, "DELETE FROM {table}")
    assert run(cli) == {"accepted": N}
    assert {(r[0], r[3]) for r in outcome_rows(cli).values()} == {("accepted", 2)}
    assert cli.json("reconcile", "search", "--manifest", "all")["complete"] is True


def test_rows_recorded_before_the_destination_was_declared_are_not_trusted(
    rebuilt: Cli, place: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = rebuilt
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    kind, url, table = place
    cli("destination", "remove", "search")
    # declared again on the same table with a transform, the same generation name
    cli("destination", "add", "search", "--source", SRC, f"--{kind}", url, "--table", table,
        "--text-fields", "name", "--transform", "test_known:upper")  # fmt: skip
    got = run(cli)
    # the transform's documents differ from those held at the same revision and
    # generation: judged, never taken for the recorded ones
    assert got == {"unresolved": N}


def upper(version: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v).upper() for k, v in version["attributes"].items()}


def _doc(i: int, chash: str = "h") -> Doc:
    return Doc(json.dumps([f"K-{i:02d}"]), i, "M-1", 1, f"{chash}{i}", False, "{}")


def test_a_range_update_counts_each_key_once_whatever_its_verdict(
    workspace: Workspace,
) -> None:
    with fl.open(workspace.config_path) as ledger:
        store = ledger.context.store
        docs = [_doc(i) for i in range(12)]
        sync_state.record(store, "d", "m", Outcome([("accepted", docs)]), 10)
        # rows of another scope and destination in the same key range stay as they are
        sync_state.record(store, "d", "live", Outcome([("accepted", docs)]), 10)
        sync_state.record(store, "e", "m", Outcome([("accepted", docs)]), 10)
        known = known_rows.read(store, Known("d", "m", "M-1", 5, docs[0].key, docs[-1].key))
        assert len(known.rows) == 12
        changed = [_doc(3, "other"), _doc(4, "other")]  # recorded, not confirmed
        odd = Verdict(docs[5].key, "superseded", 5, "M-1", "h5", "fresher source data")
        current = [d for d in docs if d.key not in {docs[3].key, docs[4].key, docs[5].key}]
        outcome = Outcome([("already_current", [*current, *changed])], [odd], known)
        sync_state.record(store, "d", "m", outcome, 20)
        with store.engine.connect() as conn:
            got = {
                json.loads(r[0])[0]: tuple(r[1:])
                for r in conn.execute(
                    text(
                        "SELECT key, verdict, content_hash, attempts, at, reason "
                        "FROM sync_outcomes WHERE destination = 'd' AND scope = 'm'"
                    )
                )
            }
            others = conn.execute(
                text(
                    "SELECT DISTINCT verdict, attempts, at FROM sync_outcomes "
                    "WHERE NOT (destination = 'd' AND scope = 'm')"
                )
            ).all()
        assert len(got) == 12
        assert got["K-03"] == ("already_current", "other3", 2, 20, None)
        assert got["K-05"] == ("superseded", "h5", 2, 20, "fresher source data")
        for i in (0, 1, 2, 6, 11):
            assert got[f"K-{i:02d}"] == ("already_current", f"h{i}", 2, 20, None)
        assert [tuple(r) for r in others] == [("accepted", 1, 10)]
        # recorded before `since`: nothing confirmed
        late = known_rows.read(store, Known("d", "m", "M-1", 21, docs[0].key, docs[-1].key))
        assert late.rows == {}
