"""Engine creation for both backends, schema checks and Alembic upgrades."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from feedledger.ledger.failures import PROBE, Place, guard
from feedledger.ledger.failures import redact as redact  # the workspace commands name it here
from feedledger.ledger.runs.holders import holder_dead
from feedledger.model.errors import SchemaTooNewError, StoreUnavailableError, UpgradeBlockedError
from feedledger.model.timeutil import now_us

MIGRATIONS = Path(__file__).parent / "migrations"
# Every migration, oldest first, and the newest. Kept here so ordinary commands need not
# import Alembic (a test checks they are Alembic's own chain and head). A store whose
# revision is not among them is newer than this release: it runs against it only while
# the store's floor is among them (`check_schema`, `refuse_newer`: docs/upgrading.md).
REVISIONS: tuple[str, ...] = (
    "0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011",
    "0012_decoded_changes", "0013_observations", "0014_health_indexes", "0015_schema_floor",
    "0016_delta_exports",
)  # fmt: skip
HEAD = REVISIONS[-1]
FLOORED = "0015_schema_floor"  # the first revision with `schema_floor` and `holder_schema`
PAGE_SIZE = 16384
CACHE_KIB = 65536  # the page cache of each SQLite connection


def normalise_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _wal(cur: Any) -> bool:
    """Put the store in WAL mode (a no-op when it is); False when it cannot be now:
    opened while another connection writes a source's first payload with a rollback
    journal (ledger/staging.py), holding the file, so the switch is refused at once. The
    connection then works on the journal (a reader sees the store as it was, a writer
    waits for that commit) and takes the log once it finds it again; until then its
    commits sync the journal's directory too (synchronous=EXTRA)."""
    try:
        return str(cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower() == "wal"
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
            raise
        return False


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (IMMEDIATE)
    cur = dbapi_conn.cursor()
    # 16 KiB pages for a new store (a no-op on an existing one): a payload's versions
    # are written in bulk, and larger pages cut the B-tree, WAL and checkpoint work per
    # row by about a quarter (bench/README.md); set before WAL mode creates the file
    cur.execute(f"PRAGMA page_size={PAGE_SIZE}")
    cur.execute("PRAGMA synchronous=FULL" if _wal(cur) else "PRAGMA synchronous=EXTRA")
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


def upgrade(engine: Engine, *, wait_s: float = 0.0, force: bool = False) -> tuple[str | None, str]:
    """Upgrade the schema to head. Returns (before, after). Refused (UpgradeBlockedError,
    nothing changed) while a live lease is held by a release of a schema older than the
    pending migrations' floor (`pending_floor`), after waiting up to `wait_s` seconds for
    those leases to go; `force`: upgrade anyway. The leases are read in the migrations'
    own transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: `leases` locked against
    writes), so no lease is taken between the check and the new schema."""
    from alembic import command  # lazy: likewise

    current = current_revision(engine)
    floor = None if force else pending_floor(current)
    deadline = time.monotonic() + wait_s
    while True:
        with engine.begin() as conn:
            held = older_holders(conn, current, floor) if floor is not None else []
            if not held:
                command.upgrade(_config(conn), "head")
                break
        left = deadline - time.monotonic()
        if left <= 0:
            assert floor is not None
            raise _blocked(held, floor, wait_s)
        time.sleep(min(1.0, left))
    return current, head_revision()


def pending_floor(current: str | None) -> str | None:
    """The floor the migrations after `current` leave (the newest one's `floor`); None:
    nothing pending, or no pending migration declares one (before 0015)."""
    from alembic.config import Config  # lazy: only set-up and schema checks need Alembic
    from alembic.script import ScriptDirectory  # lazy: likewise

    if current is None:
        return None  # a new store: nobody runs on it yet
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    for script in ScriptDirectory.from_config(cfg).iterate_revisions("head", current):
        floor = getattr(script.module, "floor", None)
        if floor is not None:
            return str(floor)
    return None


def older_holders(conn: Connection, current: str | None, floor: str) -> list[tuple[str, str, str]]:
    """(source, holder, schema) of every live lease (not expired, its holder not a
    process gone from this host) held by a release of a schema before `floor`. A lease
    whose `holder_schema` does not name its holder was taken by a release from before
    0015, which runs only on the store's own revision: `current`."""
    if current is None:
        return []
    if conn.dialect.name == "postgresql":  # no lease taken until the schema is new
        conn.exec_driver_sql("LOCK TABLE leases IN SHARE ROW EXCLUSIVE MODE")
    recorded = current not in REVISIONS or not before(current, FLOORED)
    extra = ", holder_schema" if recorded else ", NULL"
    rows = conn.exec_driver_sql(
        f"SELECT source, holder, expires_at{extra} FROM leases WHERE holder IS NOT NULL"
    ).all()
    now = now_us()
    held = []
    for source, holder, expires_at, holder_schema in rows:
        if (expires_at is not None and expires_at < now) or holder_dead(holder):
            continue
        schema, _, who = (holder_schema or "").partition(" ")
        if who != holder:
            schema = current
        if schema in REVISIONS and before(schema, floor):
            held.append((str(source), str(holder), schema))
    return held


def _blocked(held: list[tuple[str, str, str]], floor: str, wait_s: float) -> UpgradeBlockedError:
    named = ", ".join(f"{s} ({h}, schema {v})" for s, h, v in held[:3])
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
    return UpgradeBlockedError(
        f"the upgrade to {HEAD} needs every running feedledger at schema {floor} or newer, "
        f"and {len(held)} live lease(s) are held by older ones{waited}: {named}{more}; "
        "nothing was changed",
        hint="stop or upgrade those schedulers first (SIGTERM: each finishes its payload "
        "and lets go), with `db upgrade --wait SECONDS` to go ahead once they have; "
        "`--force` upgrades now (they refuse at their next lease: docs/upgrading.md)",
    )


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


def before(a: str, b: str) -> bool:
    """Whether revision `a` comes before `b` (both among REVISIONS)."""
    return REVISIONS.index(a) < REVISIONS.index(b)


def floor_known(engine: Engine) -> bool:
    """Whether this release may run on the store behind `engine` (`refuse_newer` lets
    it); False also for a store without a floor table (from before 0015) or unreachable."""
    try:
        with engine.connect() as conn:
            refuse_newer(conn)
    except Exception:
        return False
    return True


def refuse_newer(conn: Connection, current: str | None = None) -> None:
    """SchemaTooNewError when the store's floor (the oldest schema whose releases may
    run against it) is a revision this release does not know: a migration newer than
    this release changed what it relies on. Read when a store at a revision this
    release does not know is opened, and with every lease (`leases.acquire`)."""
    floor = conn.execute(text("SELECT floor FROM schema_floor")).scalar()
    if floor is None or floor in REVISIONS:
        return
    at = f"is at revision {current} and " if current is not None else ""
    raise SchemaTooNewError(
        f"the store {at}needs a feedledger of schema {floor} or newer; this one is of "
        f"schema {HEAD}: nothing was done",
        hint="upgrade feedledger on this machine and start it again (docs/upgrading.md)",
    )


def check_schema(engine: Engine, url: str) -> None:
    check_reachable(engine, url)
    current = current_revision(engine)
    head = HEAD
    if current is not None and current != head and current not in REVISIONS:
        with engine.connect() as conn:  # newer than this release: compatible or not
            refuse_newer(conn, current)
        return
    if current != head:
        state = "has no feedledger schema" if current is None else f"is at revision {current}"
        raise StoreUnavailableError(
            f"the store at {redact(url)} {state}; this feedledger needs {head}",
            hint="run `feedledger db upgrade`",
        )
