"""The destinations feature: one folder (sync/), its tables on
the ledger's one MetaData without the ledger importing them, no SQL in its
orchestration, and its reads of the ledger (sync/versions.py) giving exactly what the
ledger's own rules (ledger/visibility.py) give, on a ledger with retractions, on SQLite
and PostgreSQL."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from sqlalchemy import select

import feedledger
from feedledger.config import Workspace
from feedledger.ledger import schema
from feedledger.ledger.encoding import Decoder
from feedledger.ledger.schema import metadata, versions
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import latest_per_key, visible
from feedledger.sync import tables
from feedledger.sync import versions as sync_versions
from helpers import Cli
from ledger.retracted_ledger import ledger_with_retractions, visibility_instants
from pipeline.backfill_scenario import SRC

PACKAGE = Path(feedledger.__file__).parent
SYNC_TABLES = ("destinations", "manifests", "manifest_keys", "sync_outcomes",
               "sync_checkpoints", "sync_cursors")  # fmt: skip
ORCHESTRATION = ("live.py", "rebuild.py", "reconcile.py", "destinations.py")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_sync_tables_are_the_features_own_on_the_one_metadata() -> None:
    for name in SYNC_TABLES:
        assert metadata.tables[name] is getattr(tables, name)
        assert not hasattr(schema, name), f"ledger/schema.py still declares {name}"


def test_sync_imports_only_downwards_and_its_orchestration_holds_no_sql() -> None:
    above = ("feedledger.pipeline", "feedledger.api", "feedledger.cli",
             "feedledger.scheduler", "feedledger.notify")  # fmt: skip
    for path in sorted((PACKAGE / "sync").glob("*.py")):
        bad = {m for m in _imports(path) if m.startswith(above)}
        assert not bad, f"sync/{path.name} imports {sorted(bad)}"
    # Alembic's env.py is the migration tool's entry point (Alembic loads it; nothing in
    # the ledger imports it): it declares the WHOLE schema to autogenerate, the notify
    # and sync tables included -- the one exception, as in pyproject's layers contract
    env = PACKAGE / "ledger" / "migrations" / "env.py"
    for path in sorted(p for p in (PACKAGE / "ledger").rglob("*.py") if p != env):
        bad = {m for m in _imports(path) if m.startswith(("feedledger.sync", "feedledger.notify"))}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
    for name in ORCHESTRATION:
        got = {m for m in _imports(PACKAGE / "sync" / name) if m.startswith("sqlalchemy")}
        assert not got, f"sync/{name} imports {sorted(got)}"
    for name in ("pipeline/sync.py", "pipeline/rebuild.py", "pipeline/reconcile.py",
                 "pipeline/destinations.py", "ledger/destinations.py", "ledger/manifests.py",
                 "ledger/sync_state.py"):  # fmt: skip
        assert not (PACKAGE / name).exists(), f"{name} is left behind"


def _by_rule(conn: Any, k: int | None) -> dict[str, tuple[Any, ...]]:
    cols = ["key", "attributes", "revision", "deleted", "version_id", "valid_from", "fields_id"]
    stmt = latest_per_key(cols, versions.c.source == SRC, visible(versions, k))
    text = Decoder(conn).text  # stored attribute texts are compact
    return {
        r[0]: (r[0], text(r[6], r[1]), r[2], bool(r[3]), int(r[4]), int(r[5]))
        for r in conn.execute(stmt)
    }


def test_sync_reads_follow_the_ledgers_rules(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    ledger_with_retractions(cli, tmp_path)
    store = Store(workspace.store_url)
    try:
        # the ledger's rules first, in one connection (a store connection holds SQLite's
        # write lock: the reads under test open their own afterwards)
        with store.engine.connect() as conn:
            rows = list(conn.execute(select(versions).where(versions.c.source == SRC)))
            instants = visibility_instants(rows)
            wanted = {k: _by_rule(conn, k) for k in instants}
        assert any(r.retracted_at is not None for r in rows)
        keys = sorted({r.key for r in rows})
        for k in instants:
            want = wanted[k]
            for dense in (True, False):
                got = sync_versions.latest(store, SRC, keys, k, dense=dense)
                norm = {key: (*r[:3], bool(r[3]), *map(int, r[4:])) for key, r in got.items()}
                assert norm == want, (k, dense)
            present = {key for key, r in want.items() if not r[3]}
            assert sync_versions.live_keys(store, SRC, k) == present, k
        now = wanted[None]
        state = sync_versions.current_state(store, SRC)
        assert {(r[0], r[2], r[3], r[4]) for r in now.values()} == {
            (key, rev, bool(deleted), int(vid)) for key, rev, deleted, vid in state
        }
        assert len(instants) > 3 and now
    finally:
        store.engine.dispose()
