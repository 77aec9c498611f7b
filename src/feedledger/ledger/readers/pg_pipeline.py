"""PostgreSQL reads in one round trip: each thread keeps one connection of its own per
store for the entity reads (`entity_read`), in autocommit, and sends a read's
statements pipelined (libpq pipeline mode), reading every result after one sync.

Through the pool, a read of three statements cost six round trips -- the pool's
pre-ping (BEGIN, SELECT 1), the statements one by one, the rollback -- and each one
waits for the server process to be scheduled, which on a loaded machine is most of a
request's time. Autocommit loses nothing here: at READ COMMITTED (PostgreSQL's
default) each statement of a transaction sees its own snapshot anyway.

The connection comes from the store's engine (its URL, options and search_path) and
is detached from the pool; a connection found broken is dropped and the read tried
once more on a new one (what the pre-ping did for pooled ones). It is closed by
`Store.close` (the closing thread's), when the thread ends or when the store is
garbage collected.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from feedledger.ledger.store import Store

_local = threading.local()


def _connections() -> weakref.WeakKeyDictionary[Store, Any]:
    found: weakref.WeakKeyDictionary[Store, Any] | None = getattr(_local, "conns", None)
    if found is None:
        found = _local.conns = weakref.WeakKeyDictionary()
    return found


def _connect(store: Store) -> Any:
    fairy = store.engine.raw_connection()
    conn: Any = fairy.driver_connection
    fairy.detach()  # ours now: the pool neither resets nor hands it out again
    conn.rollback()  # the pre-ping's transaction
    conn.autocommit = True
    if release not in store.closers:
        store.closers.append(release)
    return conn


def fetch(store: Store, statements: list[str], params: dict[str, Any]) -> list[list[Any]]:
    """Each statement's rows (named parameters from `params`), in one round trip."""
    import psycopg  # lazy: an SQLite store never loads psycopg

    conns = _connections()
    for attempt in (1, 2):
        conn = conns.get(store)
        if conn is None or conn.closed:
            conn = conns[store] = _connect(store)
        try:
            with conn.pipeline():
                cursors = [conn.cursor() for _ in statements]
                for cur, sql in zip(cursors, statements, strict=True):
                    cur.execute(sql, params)
                return [list(cur.fetchall()) for cur in cursors]
        except psycopg.OperationalError:
            conns.pop(store, None)
            if not conn.closed:
                conn.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def release(store: Store) -> None:
    """Close this thread's entity-read connection of `store` (`Store.close`), so that
    closing a ledger leaves no connection for the garbage collector to find open."""
    conn = _connections().pop(store, None)
    if conn is not None and not conn.closed:
        conn.close()
