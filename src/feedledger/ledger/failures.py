"""Database errors as feedledger's errors: the one table at the storage boundary.

Every error a database driver raises under the ledger -- through SQLAlchemy
(`sqlalchemy.exc.DBAPIError`) or straight from a driver (`sqlite3.Error`,
`psycopg.Error`, `adbc_driver_manager.Error`: the snapshot's streamed reads, the entity
reads, COPY, the staged SQLite writes, a destination's writes) -- is mapped here, once,
to the FeedledgerError a user reads as one line (model/errors.py). Nothing above the
ledger sees a driver's error, so neither the API nor the faces need to know SQLAlchemy.

`TABLE` is the mapping, most specific first: each row recognises one condition along
the error's chain and says it for the place that failed (the store, or a destination).
It is applied

* to every statement of an engine made by `engine.make_engine` (its `handle_error`
  event, `guard`), so no SQLAlchemy error leaves the store's engine;
* by `translating(place)` around raw-driver work (Store.translating), and
  `stream(place, batches)` around a streamed read;
* by sync/target.py to a destination's writes and reads (`Place(url, destination=)`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event

from feedledger.model.envfail import env_failure
from feedledger.model.errors import FeedledgerError, StoreUnavailableError

T = TypeVar("T")

# The packages whose errors are a database's: their error classes never leave the ledger.
DRIVERS = ("sqlalchemy", "sqlite3", "psycopg", "adbc_driver_manager", "_sqlite3")

# Messages of a connection the server ended under a statement (restart, failover,
# pg_terminate_backend, network).
_LOST = (
    "the connection is lost",
    "terminating connection",
    "server closed the connection",
    "consuming input failed",
    "connection is closed",
    "connection has been closed",
    "could not receive data from server",
    "could not send data to server",
)

# An execution option that keeps a statement's error as the driver raised it: a probe
# whose failure is an answer (`engine.current_revision`: no alembic_version table yet).
PROBE = "feedledger_probe"


@dataclass(frozen=True)
class Place:
    """Where the failing statement ran: the store at `url`, or (`destination` set) the
    destination of that name at `url`."""

    url: str
    destination: str | None = None
    reading: bool = False  # a destination read back (reconcile, explain), not a write


def redact(url: str) -> str:
    """The URL with any password replaced by ***."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def store_location(url: str) -> str:
    """The store's file (SQLite) or its redacted URL, for messages."""
    if url.startswith("sqlite"):
        return url.split("sqlite:///", 1)[-1] or url
    return redact(url)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, its `orig` (SQLAlchemy's wrapped driver error), causes and contexts."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        orig = getattr(item, "orig", None)
        todo.extend([orig if isinstance(orig, BaseException) else None])
        todo.extend([item.__cause__, item.__context__])


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_driver_error(exc: BaseException) -> bool:
    """A database's error: SQLAlchemy's DBAPIError (a driver's, wrapped), or a driver's
    own (`Error` of sqlite3, psycopg, adbc_driver_manager). SQLAlchemy's other errors
    are a misuse of it, a bug: not mapped."""
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".")[0]
        if root == "sqlalchemy" and cls.__name__ == "DBAPIError":
            return True
        if root in DRIVERS and root != "sqlalchemy" and cls.__name__ == "Error":
            return True
    return False


def _driver(exc: BaseException) -> BaseException | None:
    """The first driver error along `exc`'s chain, or None: the error is not a
    database's (a bug, an OS error of a file, a FeedledgerError)."""
    if isinstance(exc, FeedledgerError):
        return None
    return next((item for item in _chain(exc) if is_driver_error(item)), None)


# -- the conditions ---------------------------------------------------------------------
def _unreachable(exc: BaseException, place: Place) -> FeedledgerError | None:
    """No connection could be made (SQLAlchemy's error then names no statement)."""
    if getattr(exc, "statement", "") is not None or not is_driver_error(exc):
        return None
    reason = _first_line(exc)
    if place.destination is not None:
        return StoreUnavailableError(f"cannot reach destination {place.destination}: {reason}")
    return StoreUnavailableError(
        f"cannot reach the store at {redact(place.url)}: {reason}",
        hint="check the URL in feedledger.toml [store] (or FEEDLEDGER_STORE)",
    )


def _environment(exc: BaseException, place: Place) -> FeedledgerError | None:
    """A full disk, a read-only file system, no permission, an I/O error under a write
    (the transaction was rolled back: nothing of it was applied)."""
    if place.destination is not None:
        return None  # a destination's refusal says it (below)
    failure = env_failure(exc)
    if failure is None:
        return None
    where = store_location(place.url)
    return StoreUnavailableError(
        f"cannot write the store at {where}: {failure.cause} ({failure.detail})",
        hint=f"{failure.fix(where)}; nothing of this transaction was applied",
    )


def _lost(exc: BaseException, place: Place) -> FeedledgerError | None:
    """The server ended the connection under a statement; the interrupted transaction
    was not committed."""
    for item in _chain(exc):
        text = str(getattr(item, "orig", None) or item).strip()
        if getattr(item, "connection_invalidated", False) or any(
            needle in text.lower() for needle in _LOST
        ):
            reason = text.splitlines()[0] if text else type(item).__name__
            if place.destination is not None:
                return StoreUnavailableError(
                    f"lost the connection to destination {place.destination} at "
                    f"{redact(place.url)}: {reason}",
                    hint="the batch under way was not acknowledged; run the same command "
                    "again: a rebuild resumes after its last acknowledged batch",
                )
            return StoreUnavailableError(
                f"lost the connection to the store at {redact(place.url)}: {reason}",
                hint="the server ended it (restart, failover, terminated backend or "
                "network); nothing of the interrupted transaction was applied: run the "
                "command again",
            )
    return None


def _refused(exc: BaseException, place: Place) -> FeedledgerError | None:
    """Any other statement the database refused: a lock it waited for in vain, a
    privilege it lacks, a constraint, a timeout, a schema other than this version's."""
    driver = _driver(exc)
    if driver is None:
        return None
    reason = _first_line(driver)
    if place.destination is not None and place.reading:
        return StoreUnavailableError(
            f"destination {place.destination} at {redact(place.url)} refused a read: {reason}",
            hint="is its table still the one feedledger wrote? run the same command again",
        )
    if place.destination is not None:
        return StoreUnavailableError(
            f"destination {place.destination} at {redact(place.url)} refused the write: {reason}",
            hint="the batch under way was not written; run the same command again",
        )
    return StoreUnavailableError(
        f"the store refused a statement: {reason}",
        hint="is its schema from this feedledger version? `feedledger db current`; "
        "set FEEDLEDGER_DEBUG=1 for the traceback",
    )


# The table: (condition, its error for the place), most specific first.
TABLE: list[tuple[str, Callable[[BaseException, Place], FeedledgerError | None]]] = [
    ("connection lost", _lost),
    ("unreachable", _unreachable),
    ("environment", _environment),
    ("refused", _refused),
]


def translate(exc: BaseException, place: Place) -> FeedledgerError | None:
    """`exc` as feedledger's error for `place` (the table's first row that recognises
    it), or None when it is not a database's error."""
    if isinstance(exc, FeedledgerError):
        return None
    for _condition, row in TABLE:
        failure = row(exc, place)
        if failure is not None:
            return failure
    return None


@contextmanager
def translating(place: Place) -> Iterator[None]:
    """A database's error raised by the block becomes feedledger's (`translate`)."""
    try:
        yield
    except Exception as exc:
        failure = translate(exc, place)
        if failure is None:
            raise
        raise failure from exc


def stream(place: Place, items: Iterator[T]) -> Iterator[T]:
    """`items` (a streamed read), its database errors translated as they come."""
    with translating(place):
        yield from items


def guard(engine: Any, place: Place) -> None:
    """Every statement of `engine` (a SQLAlchemy Engine) that fails raises feedledger's
    error instead of SQLAlchemy's (its `handle_error` event). The pool's pre-ping and a
    statement run with the `PROBE` execution option keep theirs."""

    def handle(ctx: Any) -> BaseException | None:
        if ctx.is_pre_ping:
            return None
        options = ctx.execution_context.execution_options if ctx.execution_context else {}
        if options.get(PROBE):
            return None
        return translate(ctx.sqlalchemy_exception or ctx.original_exception, place)

    event.listen(engine, "handle_error", handle)
