"""PostgreSQL test schemas at the head schema, recycled within a test process.

Building a store's schema on PostgreSQL (the ~105 statements of the migrations, replayed
by `helpers.migrate`) and dropping it again cost the server ~0.13 s of CPU and ~90 files
created and unlinked for every PostgreSQL test (~770 of them): one of the largest costs
of the suite. So a test's schema is not dropped when it ends if nothing but its data
changed: its definition (the row versions of every catalog row of its tables, columns,
defaults, constraints, indexes, views, sequences, functions, types, privileges, owners,
and of whatever depends on them) is compared with what it was when the test got it at
the head schema, every table that differs from the pristine one in size, planner statistics or
seed rows is truncated (a new, empty file, as a new table has; its seed rows -- the
alembic version, the counters, the schema floor -- put back), its sequences restarted,
its column statistics and activity counters cleared (no `ANALYZE` a former test caused
shows, and autovacuum owes it nothing), and it is renamed into this process's pool.
The next `migrate` takes a pooled schema and renames it to the new test's schema name
instead of replaying the migrations. Anything else (a schema not at the head, a changed
definition, a lock still held by a process the test left behind) is dropped as before.

So a test starts from a schema indistinguishable from a freshly migrated one: the same
definition, empty tables with never-analysed statistics, the same seed rows, sequences
at their start. The first recycled schema of each process is compared with Alembic's own
catalog (`helpers._pg_catalog`), as the first replay is.
"""

from __future__ import annotations

import atexit
import os
import uuid
from typing import Any

# FEEDLEDGER_TEST_PG_POOL=0: every PostgreSQL test schema replayed and dropped (as before)
ENABLED = os.environ.get("FEEDLEDGER_TEST_PG_POOL", "1") != "0"

# the schemas of this process ready to be renamed into a test's (clean, at the head)
_POOL: list[str] = []
# the pristine schema: its tables' (size, reltuples, relpages, column statistics) and
# the rows of the tables the migrations fill
_PRISTINE: dict[str, Any] = {}
_CHECKED: list[bool] = []  # a recycled schema was compared with Alembic's catalog
# how often a schema was taken from the pool, recycled into it, dropped (for --durations
# style reports: FEEDLEDGER_TEST_PG_POOL_LOG=path appends them at exit)
COUNTS = {"taken": 0, "recycled": 0, "dropped": 0}
# schema -> the fingerprint of its definition when it was brought to the head schema
_SNAPSHOT: dict[str, str] = {}

# The row versions (xmin) of the catalog rows that define schema `ns` (its oid): the
# objects that depend on it (tables, views, sequences, functions, types), those that
# depend on its relations (indexes, constraints, defaults, triggers, rules, views and
# foreign keys elsewhere), its relations' and columns' rows. Any DDL, GRANT or owner
# change writes new ones; VACUUM and ANALYZE update pg_class in place (same xmin).
# Equal before and after a test: the test changed no definition. (Every lookup goes
# through an index: the suite's churn of schemas bloats the catalogs, where a scan of
# pg_class alone took ~50 ms.)
_OWN = """
own AS (SELECT classid, objid, xmin FROM pg_depend
        WHERE refclassid = 'pg_namespace'::regclass AND refobjid = %(ns)s),
tabs AS (SELECT objid AS oid FROM own WHERE classid = 'pg_class'::regclass)
"""

_FINGERPRINT = (
    "WITH"
    + _OWN
    + """,
rels AS (SELECT oid FROM tabs
         UNION SELECT i.indexrelid FROM pg_index i JOIN tabs t ON i.indrelid = t.oid),
items AS (
  SELECT 'own' AS k, classid || '.' || objid AS id, xmin::text AS v FROM own
  UNION ALL SELECT 'dep', d.classid || '.' || d.objid || '.' || d.objsubid || '>' || d.refobjid
         || '.' || d.refobjsubid || d.deptype::text, d.xmin::text
  FROM pg_depend d JOIN rels r ON d.refclassid = 'pg_class'::regclass AND d.refobjid = r.oid
  UNION ALL SELECT 'rel', c.oid::text, c.xmin::text FROM pg_class c JOIN rels r ON c.oid = r.oid
  UNION ALL SELECT 'att', a.attrelid || '.' || a.attnum, a.xmin::text
  FROM pg_attribute a JOIN rels r ON a.attrelid = r.oid
  UNION ALL SELECT 'con', c.oid::text, c.xmin::text
  FROM pg_constraint c JOIN tabs t ON c.conrelid = t.oid
  UNION ALL SELECT 'fn', p.oid::text, p.xmin::text
  FROM pg_proc p JOIN own o ON o.classid = 'pg_proc'::regclass AND p.oid = o.objid
  UNION ALL SELECT 'type', y.oid::text, y.xmin::text
  FROM pg_type y JOIN own o ON o.classid = 'pg_type'::regclass AND y.oid = o.objid
  UNION ALL SELECT 'nsp', oid::text, xmin::text FROM pg_namespace WHERE oid = %(ns)s
)
SELECT md5(string_agg(k || ' ' || id || ' ' || v, ',' ORDER BY k, id)) FROM items
"""
)

# every table: its total size (heap, indexes, toast), planner statistics, and whether
# pg_statistic holds column statistics for it
_TABLES = (
    "WITH"
    + _OWN
    + """
SELECT c.oid, c.relname, pg_total_relation_size(c.oid), c.reltuples, c.relpages,
       EXISTS (SELECT 1 FROM pg_statistic s WHERE s.starelid = c.oid)
FROM pg_class c JOIN tabs t ON c.oid = t.oid WHERE c.relkind = 'r' ORDER BY c.relname
"""
)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _namespace(cur: Any, schema: str) -> int | None:
    cur.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", (schema,))
    row = cur.fetchone()
    return None if row is None else int(row[0])


def _fingerprint(cur: Any, ns: int) -> str:
    # (a catalog bloated by the suite's churn of schemas has estimates high enough to
    # have this query JIT-compiled: seconds, for a few thousand rows)
    cur.execute("SET LOCAL jit = off")
    cur.execute(_FINGERPRINT, {"ns": ns})
    return str(cur.fetchone()[0])


def _state(cur: Any, ns: int) -> dict[str, tuple[int, tuple[Any, ...]]]:
    """table name -> (oid, (total size, reltuples, relpages, has column statistics))"""
    cur.execute(_TABLES, {"ns": ns})
    return {row[1]: (int(row[0]), tuple(row[2:])) for row in cur.fetchall()}


def _rows(cur: Any, schema: str, table: str) -> list[tuple[Any, ...]]:
    cur.execute(f"SELECT * FROM {_ident(schema)}.{_ident(table)} ORDER BY 1")
    return [tuple(r) for r in cur.fetchall()]


def record_pristine(conn: Any, schema: str) -> None:
    """Notes the table states of `schema`, freshly migrated (and compared with Alembic's
    catalog): what a recycled schema's tables must be."""
    if _PRISTINE:
        return
    with conn.cursor() as cur:
        ns = _namespace(cur, schema)
        assert ns is not None
        state = _state(cur, ns)
        seeds = {t: _rows(cur, schema, t) for t in state}
        _PRISTINE.update(
            tables={t: s for t, (_oid, s) in state.items()},
            seeds={t: rows for t, rows in seeds.items() if rows},
        )
    conn.rollback()


def note(conn: Any, schema: str) -> None:
    """Notes the definition of `schema`, just brought to the head schema (committed):
    at the test's end it is compared to tell whether the test changed it."""
    with conn.cursor() as cur:
        ns = _namespace(cur, schema)
        if ns is not None:
            _SNAPSHOT[schema] = _fingerprint(cur, ns)
    conn.rollback()


def take(conn: Any, schema: str) -> bool:
    """Puts a pooled head schema in the place of the new, empty `schema`; False where
    the pool is empty or `schema` is not empty (the caller migrates it instead)."""
    if not _POOL or not ENABLED:
        return False
    pooled = _POOL.pop()
    try:
        with conn.cursor() as cur:
            # (a schema created with privileges or an owner of its own keeps them: migrated)
            cur.execute(
                "SELECT n.nspacl IS NULL AND n.nspowner = p.nspowner FROM pg_namespace n,"
                " pg_namespace p WHERE n.nspname = %s AND p.nspname = %s",
                (schema, pooled),
            )
            plain = cur.fetchone()
            if not plain or not plain[0]:
                raise LookupError(schema)
            cur.execute(f"DROP SCHEMA {_ident(schema)} RESTRICT")
            cur.execute(f"ALTER SCHEMA {_ident(pooled)} RENAME TO {_ident(schema)}")
            _rebind_functions(cur, pooled, schema)
        conn.commit()
    except Exception:
        conn.rollback()
        _POOL.append(pooled)
        return False
    note(conn, schema)
    COUNTS["taken"] += 1
    return True


def _rebind_functions(cur: Any, old: str, new: str) -> None:
    """Functions created with `SET search_path FROM CURRENT` name the schema they were
    created in: they follow its new name."""
    cur.execute(
        "SELECT p.oid::regprocedure::text, cfg FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace, unnest(p.proconfig) AS cfg"
        " WHERE n.nspname = %s AND cfg LIKE 'search\\_path=%%'",
        (new,),
    )
    for signature, cfg in cur.fetchall():
        value = cfg.split("=", 1)[1]
        parts = [_ident(new) if p.strip().strip('"') == old else p for p in value.split(",")]
        cur.execute(f"ALTER FUNCTION {signature} SET search_path = {', '.join(parts)}")


def release(conn: Any, schema: str) -> bool:
    """Cleans `schema` into the pool when only its data changed; False (nothing done)
    where it must be dropped instead."""
    noted = _SNAPSHOT.pop(schema, None)
    if not _PRISTINE or noted is None or not ENABLED:
        return False
    try:
        with conn.cursor() as cur:
            cur.execute("SET LOCAL lock_timeout = '2s'")
            ns = _namespace(cur, schema)
            if ns is None or _fingerprint(cur, ns) != noted:
                conn.rollback()
                return False
            state = _state(cur, ns)
            if set(state) != set(_PRISTINE["tables"]):
                conn.rollback()
                return False
            seeds: dict[str, list[tuple[Any, ...]]] = _PRISTINE["seeds"]
            dirty = [
                t
                for t, (_oid, s) in state.items()
                if s != _PRISTINE["tables"][t] or (t in seeds and _rows(cur, schema, t) != seeds[t])
            ]
            qualified = [f"{_ident(schema)}.{_ident(t)}" for t in dirty]
            if dirty:
                cur.execute(f"TRUNCATE {', '.join(qualified)} RESTART IDENTITY CASCADE")
                oids = [state[t][0] for t in dirty]
                cur.execute("DELETE FROM pg_statistic WHERE starelid = ANY(%s)", (oids,))
                for table in dirty:
                    for row in seeds.get(table, []):
                        marks = ", ".join(["%s"] * len(row))
                        cur.execute(
                            f"INSERT INTO {_ident(schema)}.{_ident(table)} VALUES ({marks})", row
                        )
            cur.execute(
                "WITH" + _OWN + "SELECT setval(s.seqrelid, s.seqstart, false)"
                " FROM pg_sequence s JOIN tabs t ON t.oid = s.seqrelid",
                {"ns": ns},
            )
            pooled = f"t_pool_{uuid.uuid4().hex[:12]}"
            cur.execute(f"ALTER SCHEMA {_ident(schema)} RENAME TO {_ident(pooled)}")
            _rebind_functions(cur, schema, pooled)
        conn.commit()
    except Exception:
        conn.rollback()
        return False
    with conn.cursor() as cur:  # after the commit, which counted the truncates
        oids = [oid for oid, _s in state.values()]
        cur.execute(
            "SELECT pg_stat_reset_single_table_counters(o) FROM unnest(%s::oid[]) o", (oids,)
        )
    conn.commit()
    _POOL.append(pooled)
    COUNTS["recycled"] += 1
    return True


def check_against_alembic(url: str) -> None:
    """Once per process, on the first recycled schema taken (at `url`): its catalog
    equals the one Alembic built."""
    if _CHECKED:
        return
    from feedledger.ledger import engine as eng
    from helpers import _PG_CATALOG, _pg_catalog

    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            assert _pg_catalog(conn) == _PG_CATALOG[0], "a recycled schema differs from Alembic's"
    finally:
        engine.dispose()
    _CHECKED.append(True)


def drop_pool(base: str) -> None:
    """Drops this process's pooled schemas (at exit)."""
    log = os.environ.get("FEEDLEDGER_TEST_PG_POOL_LOG")
    if log and any(COUNTS.values()):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {COUNTS}\n")
        COUNTS.update(taken=0, recycled=0, dropped=0)
    if not _POOL:
        return
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        while _POOL:
            conn.execute(f"DROP SCHEMA IF EXISTS {_ident(_POOL.pop())} CASCADE")


def register_cleanup(base: str) -> None:
    if not getattr(register_cleanup, "done", False):
        atexit.register(drop_pool, base)
        register_cleanup.done = True  # type: ignore[attr-defined]
