"""Staging a large payload's version rows on SQLite, overlapped with its transaction.

Encoding the rows and binding them one at a time costs more than SQLite's copy of
them; both can run beside the payload's transaction. The rows go through scratch files:

* a writer thread encodes the rows a chunk at a time (`bulk.version_parts`) and writes
  them (the sqlite3 module's `executemany`) into a series of scratch files beside the
  database, each closed and announced as soon as it is complete;
* meanwhile the payload's transaction (BEGIN IMMEDIATE on the store's own connection)
  attaches each complete file and copies it with one `INSERT ... SELECT`, while the
  writer fills the next one (SQLite lets go of the GIL while it steps).

Binding values one by one is the writer's cost, so only what varies is written: a
column holding one value for every row of the payload (a first load's `change`,
`deleted`, `prev_version_id`, `revision`) is bound once in the copy instead, and
contiguous version ids are the copy's `first + rowid` (`bulk.stage_layout`).

Only the sqlite3 module's SQLite is used here, the library of the store's own
connections: a second SQLite library in the process (the ADBC SQLite driver links
its own, and wrote these files once) is a way to corrupt the store (ledger/readers/arrow_fetch.py).

Atomicity stays the store's: the scratch files are only ever a source, read after their
writer closed them; they have no journal and are never synced, and they are deleted
when the payload's transaction is over (committed or not). A file is attached only
once complete, so the store's connection never holds a stale view of it.

SQLite builds that refuse ATTACH inside a transaction (older than this project's usual
3.40+) get the same files written in full before the transaction instead.

A source's first large payload is written once, not twice (`rollback_journal`): in the
store's write-ahead log mode every page of it would go into the log at the commit and
be copied from there into the database file by the checkpoint at close (~190 MB and
~0.6 s at 1M rows). When the transaction's connection is the only one on the store's
file, it takes a rollback journal for that one transaction instead: the new pages are
written to the database file directly (pages past its end need no journal), only the
few existing pages it changes are journaled, and the commit deletes the journal
(`synchronous=EXTRA`: the directory synced after, as durable as the log's commit). A
crash before the commit leaves a hot journal, which the next connection rolls back
before it reads anything. Afterwards the connection goes back to the log. A connection
that opens the store meanwhile waits for the commit (its busy timeout) instead of
reading the store as it was; such a payload's rows are capped (`DIRECT_MAX_ROWS`) so
that wait stays short.
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

STAGE_PAGE_SIZE = 16384
FILE_ROWS = 200_000  # rows per scratch file (more per file for payloads over 8 files)
MAX_FILES = 8  # SQLite attaches at most 10 databases by default


def scratch_base(db: str | None) -> Path | None:
    """The scratch files' common prefix beside the SQLite database (None for :memory:).
    Scratch files left by a process that died (kill -9) are removed first."""
    if not db or db == ":memory:":
        return None
    path = Path(db)
    sweep(path)
    return path.with_name(f".{path.name}.stage-{os.getpid()}-{secrets.token_hex(4)}")


def sweep(db: Path) -> list[Path]:
    """Delete the scratch files of processes no longer alive (this host: SQLite stores
    are local files); returns what was deleted."""
    gone: list[Path] = []
    for leftover in db.parent.glob(f".{db.name}.stage-*"):
        pid = leftover.name[len(f".{db.name}.stage-") :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            leftover.unlink(missing_ok=True)
            gone.append(leftover)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# the most rows a payload may hold for its transaction to take a rollback journal (at
# ~1 s a million on a quiet machine, a connection opened meanwhile waits seconds, far
# under the store's 60 s busy timeout)
DIRECT_MAX_ROWS = 4_000_000


def rollback_journal(raw: sqlite3.Connection) -> bool:
    """Switch `raw` (the store's connection, no transaction open) from the write-ahead
    log to a rollback journal if it is the only connection on the file (SQLite's own
    condition for leaving WAL mode), without waiting for any other; True if it did.
    A log left by an earlier writer is checkpointed first (SQLite does it)."""
    timeout = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute("PRAGMA busy_timeout=0")
    try:
        mode = raw.execute("PRAGMA main.journal_mode=DELETE").fetchone()[0]
    except sqlite3.OperationalError:  # another connection has the file open
        return False
    finally:
        raw.execute(f"PRAGMA busy_timeout={int(timeout)}")
    if str(mode).lower() != "delete":
        return False
    # the commit is the journal's deletion: durable once the directory is synced
    raw.execute("PRAGMA synchronous=EXTRA")
    return True


def back_to_wal(raw: sqlite3.Connection) -> None:
    """`raw` back in the write-ahead log mode the store's connections use (after
    `rollback_journal`, its transaction over); waits, as a new connection's set-up
    would, for a reader that opened the file meanwhile."""
    raw.execute("PRAGMA synchronous=FULL")
    mode = raw.execute("PRAGMA main.journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(f"the store stayed in journal mode {mode}")


@functools.cache
def attach_in_transaction() -> bool:
    """Whether this SQLite lets a connection ATTACH inside an open transaction."""
    probe = sqlite3.connect(":memory:", isolation_level=None)
    try:
        probe.execute("BEGIN")
        probe.execute("ATTACH DATABASE ':memory:' AS probe")
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


def write_file(path: Path, parts: Iterable[pl.DataFrame]) -> None:
    """Write `parts` into table `batch` (untyped columns named as the first part's) of a
    fresh scratch SQLite file, in one transaction."""
    path.unlink(missing_ok=True)
    # (no journal, no sync: a scratch file is read only once complete, and never
    # after a crash; the writer thread opens and closes it)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        for pragma in (
            f"PRAGMA page_size={STAGE_PAGE_SIZE}",
            "PRAGMA journal_mode=OFF",
            "PRAGMA synchronous=OFF",
        ):
            conn.execute(pragma)
        conn.execute("BEGIN")
        created = False
        for part in parts:
            if not created:
                names = ", ".join(f'"{c}"' for c in part.columns)
                conn.execute(f"CREATE TABLE batch ({names})")
                created = True
            _insert_rows(conn, part)
        conn.execute("COMMIT")
    finally:
        conn.close()  # (a transaction still open is rolled back: the file is discarded)


# rows bound per INSERT statement: a statement stepped (and the GIL let go) per 64 rows,
# not per row, ~25 % less CPU than one row each; 64 x the widest part's 10 columns
# stays under 999, the oldest SQLite's most parameters in one statement
INSERT_ROWS = 64


def _insert_rows(conn: sqlite3.Connection, part: pl.DataFrame) -> None:
    """Append the rows of `part` to table `batch`, INSERT_ROWS rows a statement."""
    width = part.width

    def insert(rows: int) -> str:
        one = f"({', '.join('?' * width)})"
        return f"INSERT INTO batch VALUES {', '.join([one] * rows)}"

    # columns to lists (in Polars, at once), then the values row after row, flat
    columns = [col.to_list() for col in part.get_columns()]
    values = itertools.chain.from_iterable(zip(*columns, strict=True))
    full, rest = divmod(part.height, INSERT_ROWS)
    if full:
        groups = zip(*[values] * (width * INSERT_ROWS), strict=False)
        conn.executemany(insert(INSERT_ROWS), itertools.islice(groups, full))
    if rest:
        conn.execute(insert(rest), tuple(values))


class _Cancelled(Exception):
    pass


class Stager:
    """Writes `parts` into scratch files `<base>-0`, `<base>-1`, ... on a thread (or
    all of them at once, `overlapped=False`); `files()` yields each once complete.

    Use as a context manager: leaving it stops the writer and deletes every file."""

    def __init__(
        self, base: Path, parts: Iterator[pl.DataFrame], rows: int, *, overlapped: bool
    ) -> None:
        self.base = base
        self.per_file = max(FILE_ROWS, -(-rows // MAX_FILES))
        self._parts = parts
        self._ready: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._written: list[Path] = []
        # schema names attached on the store's connection, with the rows before each file
        self.attached: list[tuple[str, int]] = []
        self._thread: threading.Thread | None = None
        if overlapped:
            self._thread = threading.Thread(target=self._run, name="feedledger-stage")
            self._thread.start()
        else:
            self._run()

    def __enter__(self) -> Stager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _file_parts(self, first: pl.DataFrame, held: list[int]) -> Iterator[pl.DataFrame]:
        """`first`, then parts until this file holds `per_file` rows (counted in `held`)."""
        held[0] = first.height
        yield first
        while held[0] < self.per_file:
            if self._stop.is_set():
                raise _Cancelled
            part = next(self._parts, None)
            if part is None:
                return
            held[0] += part.height
            yield part

    def _run(self) -> None:
        try:
            rows = 0  # the payload's rows before this file's first
            for n in itertools.count():
                first = next(self._parts, None)
                if first is None or self._stop.is_set():
                    break
                path = self.base.with_name(f"{self.base.name}-{n}")
                self._written.append(path)
                held = [0]
                write_file(path, self._file_parts(first, held))
                self._ready.put((path, rows))
                rows += held[0]
        except _Cancelled:
            pass
        except BaseException as exc:  # handed to the transaction's thread
            self._ready.put(exc)
            return
        self._ready.put(None)

    def files(self) -> Iterator[tuple[Path, int]]:
        """Each complete scratch file, in order, with the number of the payload's rows
        before its first; the writer's error is raised here."""
        while True:
            item = self._ready.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for path in self._written:
            path.unlink(missing_ok=True)

    def attach(self, raw: Any, path: Path, before: int) -> tuple[str, int]:
        name = f"stage{len(self.attached)}"
        raw.execute(f"ATTACH DATABASE ? AS {name}", (str(path),))
        self.attached.append((name, before))
        return name, before

    def attach_all(self, raw: Any) -> None:
        """Attach every file before the transaction (SQLite without ATTACH inside one;
        the files were all written when the Stager was made)."""
        for path, before in self.files():
            self.attach(raw, path, before)

    def detach_all(self, raw: Any) -> None:
        """Once the transaction is over (SQLite refuses DETACH inside one)."""
        while self.attached:
            raw.execute(f"DETACH DATABASE {self.attached.pop()[0]}")

    def copy_into_versions(
        self, raw: Any, statement: Callable[[str, int], tuple[str, tuple[Any, ...]]]
    ) -> None:
        """Inside the open transaction of `raw` (the store's sqlite3 connection): copy
        each file's rows into `versions`, attaching each as it completes (or using those
        attached before the transaction). `statement(schema, before)`: the copy of the
        file attached as `schema` whose first row is the payload's row `before` (from
        0), and its parameters."""
        names = list(self.attached) or (self.attach(raw, *file) for file in self.files())
        for name, before in names:
            raw.execute(*statement(name, before))
