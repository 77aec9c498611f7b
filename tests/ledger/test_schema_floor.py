"""The store's schema floor (migration 0015, ledger/engine.py; docs/upgrading.md), in
process on SQLite and PostgreSQL: REVISIONS is Alembic's own chain; a store at a
revision newer than this release opens while its floor is one this release knows and
is refused (SchemaTooNewError, one line) when not -- and so is a lease, nothing written;
a lease names its holder's schema and lets go of it; `upgrade` sees only live leases
of releases older than the pending floor (a dead holder's, an expired one, a newer
release's or a release from before 0015 at the floor do not count)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory

from feedledger.ledger import engine as eng
from feedledger.ledger.runs import holders, leases
from feedledger.ledger.schema import runs
from feedledger.ledger.store import Store
from feedledger.model.errors import SchemaTooNewError
from feedledger.model.timeutil import now_us
from helpers import migrate


def test_revisions_are_alembics_chain() -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(eng.MIGRATIONS))
    chain = [s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()]
    assert tuple(reversed(chain)) == eng.REVISIONS and eng.head_revision() == eng.HEAD
    assert eng.pending_floor(eng.HEAD) is None
    assert eng.pending_floor("0014_health_indexes") == "0013_observations"


def _newer(url: str, floor: str) -> None:
    """The store as a newer release's `db upgrade` leaves it: a revision this release
    does not know, and `floor`."""
    engine = eng.make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'next_release'"))
            conn.execute(sa.text("UPDATE schema_floor SET floor = :f"), {"f": floor})
    finally:
        engine.dispose()


def test_a_newer_store_opens_while_its_floor_is_known_and_not_after(store_url: str) -> None:
    migrate(store_url)
    store = Store(store_url)
    try:
        leases.acquire(store, "s", "me:1:a:1", "run-1", run_kind="live")
        with store.engine.connect() as conn:
            (value,) = conn.execute(sa.text("SELECT holder_schema FROM leases")).one()
        assert value == f"{eng.HEAD} me:1:a:1"
        leases.release(store, "s", "me:1:a:1", run_id="run-1", status="succeeded")
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT holder_schema FROM leases")).all() == [(None,)]
    finally:
        store.close()
    _newer(store_url, "0013_observations")
    store = Store(store_url)  # compatible: opens, leases
    try:
        leases.acquire(store, "s", "me:1:b:1", "run-2", run_kind="live")
        leases.release(store, "s", "me:1:b:1", run_id="run-2", status="succeeded")
    finally:
        store.close()
    _newer(store_url, "next_release")
    with pytest.raises(SchemaTooNewError) as refused:
        Store(store_url)
    assert "is at revision next_release and needs a feedledger of schema next_release" in str(
        refused.value
    )
    assert "\n" not in str(refused.value)
    store = Store(store_url, check=False)  # a process that opened it before the upgrade
    try:
        with pytest.raises(SchemaTooNewError):
            leases.acquire(store, "s", "me:1:c:1", "run-3", run_kind="live")
        with store.engine.connect() as conn:
            assert conn.execute(sa.select(runs.c.run_id).order_by(runs.c.run_id)).all() == [
                ("run-1",),
                ("run-2",),
            ]
            held = conn.execute(sa.text("SELECT holder FROM leases")).all()
        assert held == [(None,)]
    finally:
        store.close()


def test_only_live_leases_of_older_releases_hold_an_upgrade_back(store_url: str) -> None:
    migrate(store_url)
    engine = eng.make_engine(store_url)
    mine = holders.new_holder()
    far = now_us() + 600_000_000
    rows = [
        ("older", mine, far, f"0014_health_indexes {mine}"),  # claims an older schema
        ("current", "elsewhere:1:a:1", far, f"{eng.HEAD} elsewhere:1:a:1"),
        ("before_0015", "elsewhere:2:b:1", far, f"{eng.HEAD} someone-else"),  # stale value
        ("expired", "elsewhere:3:c:1", 1, "0014_health_indexes elsewhere:3:c:1"),
        ("dead", f"{mine.split(':')[0]}:999999999:d:1", far, "0014_health_indexes x"),
        ("free", None, None, None),
    ]
    try:
        with engine.begin() as conn:
            for source, holder, expires, schema in rows:
                conn.execute(
                    sa.text(
                        "INSERT INTO leases (source, holder, expires_at, holder_schema)"
                        " VALUES (:s, :h, :e, :v)"
                    ),
                    {"s": source, "h": holder, "e": expires, "v": schema},
                )
        with engine.begin() as conn:
            # at the store's own revision: a release from before 0015 runs only there
            assert eng.older_holders(conn, eng.HEAD, eng.HEAD) == [
                ("older", mine, "0014_health_indexes")
            ]
        with engine.begin() as conn:  # a store before 0015: every holder is of its schema
            got = eng.older_holders(conn, "0014_health_indexes", eng.HEAD)
        assert sorted(s for s, _h, _v in got) == ["before_0015", "current", "older"]
        with engine.begin() as conn:
            assert eng.older_holders(conn, eng.HEAD, "0013_observations") == []
    finally:
        engine.dispose()
