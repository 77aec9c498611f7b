"""Engine creation for both backends, schema checks and Alembic upgrades."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from feedledger.ledger.failures import PROBE, Place, guard
from feedledger.ledger.failures import redact as redact  # the workspace commands name it here
from feedledger.model.errors import StoreUnavailableError

MIGRATIONS = Path(__file__).parent / "migrations"
# The newest migration. Kept here so ordinary commands need not import Alembic
# (a test checks it equals Alembic's own head).
HEAD = "0014_health_indexes"
PAGE_SIZE = 16384
CACHE_KIB = 65536  # the page cache of each SQLite connection


def normalise_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (IMMEDIATE)
    cur = dbapi_conn.cursor()
    # 16 KiB pages for a new store (a no-op on an existing one): a payload's versions
    # are written in bulk, and larger pages cut the B-tree, WAL and checkpoint work per
    # row by about a quarter (bench/README.md); set before WAL mode creates the file
    cur.execute(f"PRAGMA page_size={PAGE_SIZE}")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    # No automatic checkpoint inside a payload's commit: the WAL is checkpointed when the
    # store is closed (Store.close) — off the payload's critical path, same durability.
    cur.execute("PRAGMA wal_autocheckpoint=0")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    # Take the write lock at BEGIN: no lock upgrades, no SQLITE_BUSY deadlocks.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for the store at `url`. `create`: an SQLite store that does not exist
    yet may be created (its folders too) -- only `init`, `db upgrade` and set-up code
    pass it; every other command gets "no store at PATH" and nothing is created."""
    real = normalise_url(url)
    if real.startswith("sqlite"):
        path = real.split("sqlite:///", 1)[-1]
        if path and path != ":memory:" and not create and not Path(path).exists():
            raise StoreUnavailableError(
                f"cannot reach the store: no store at {path}",
                hint="run `feedledger init` or `feedledger db upgrade` to create it, or "
                "fix the URL in feedledger.toml [store] (or FEEDLEDGER_STORE)",
            )
        if path and path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailableError(
                    f"cannot reach the store at {redact(url)}: cannot create "
                    f"{Path(path).parent}: {exc.strerror}",
                    hint="check the URL in feedledger.toml [store] (or FEEDLEDGER_STORE)",
                ) from None
        engine = create_engine(real, connect_args={"timeout": 60})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        guard(engine, Place(url))
        return engine
    if real.startswith("postgresql"):
        _quiet_psycopg()
        engine = create_engine(real, pool_pre_ping=True, connect_args={"connect_timeout": 10})
        guard(engine, Place(url))
        return engine
    raise StoreUnavailableError(
        f"unsupported store URL {redact(url)!r}: use sqlite:///PATH or postgresql://..."
    )


def _quiet_psycopg() -> None:
    """psycopg logs 'error ignored terminating <psycopg.Copy [BAD]>' when a COPY's
    connection is already gone; with no logging set up, Python prints it on stderr next
    to the one-line error that already says so."""
    log = logging.getLogger("psycopg")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        # a handler of its own: Python's last-resort printer stays out; an application
        # that set up logging still gets the record (it propagates)
        log.addHandler(logging.NullHandler())


def _config(connection: Any) -> Any:
    from alembic.config import Config  # lazy: only set-up and schema checks need Alembic

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """Alembic's own view of the head (imports Alembic; use HEAD on hot paths)."""
    from alembic.config import Config  # lazy: only set-up and schema checks need Alembic
    from alembic.script import ScriptDirectory  # lazy: likewise

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The store's schema revision, read from alembic_version (None if absent)."""
    with engine.connect() as conn:
        try:
            rows = conn.execute(
                text("SELECT version_num FROM alembic_version"),
                execution_options={PROBE: True},  # no table yet: an answer, not a failure
            ).all()
        except (OperationalError, ProgrammingError):
            return None
    return str(rows[0][0]) if rows else None


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Upgrade the schema to head. Returns (before, after)."""
    from alembic import command  # lazy: likewise

    before = current_revision(engine)
    with engine.begin() as conn:
        command.upgrade(_config(conn), "head")
    return before, head_revision()


def settings(engine: Engine, names: list[str]) -> dict[str, str]:
    """PostgreSQL's `SHOW name` of each of `names` as this engine's sessions see them
    (`doctor`); {} on SQLite."""
    if engine.dialect.name != "postgresql":
        return {}
    got: dict[str, str] = {}
    with engine.connect() as conn:
        for name in names:
            if not name.replace("_", "").isalnum():
                raise ValueError(f"not a setting name: {name!r}")
            got[name] = str(conn.execute(text(f"SHOW {name}")).scalar_one())
    return got


def check_reachable(engine: Engine, url: str) -> None:
    """StoreUnavailableError ('cannot reach the store at URL') when no connection can be
    made (the engine's guard says so: ledger/failures.py)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def check_schema(engine: Engine, url: str) -> None:
    check_reachable(engine, url)
    current = current_revision(engine)
    head = HEAD
    if current != head:
        state = "has no feedledger schema" if current is None else f"is at revision {current}"
        raise StoreUnavailableError(
            f"the store at {redact(url)} {state}; this feedledger needs {head}",
            hint="run `feedledger db upgrade`",
        )
