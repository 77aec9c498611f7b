"""What every route shares: the open ledger (one per process, `app.state.ledger`),
JSON answers written as the CLI writes them (`feedledger.model.jsonout.dumps`: number
literals as stated), and times and keys as typed in a URL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import Response

import feedledger as fl
from feedledger.model.jsonout import dumps
from feedledger.model.timeutil import parse_instant


class JSONText(Response):
    """A JSON answer in feedledger's own JSON (as the CLI's `--json`, compact)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content, indent=None).encode("utf-8")


async def ledger(request: Request) -> fl.Ledger:
    """The process's ledger (a FastAPI dependency; async: no threadpool hop)."""
    led: fl.Ledger = request.app.state.ledger
    return led


# threads (and PostgreSQL connections) of a process's entity reads. Two: at 20 clients
# on 2 cores and 2 workers, 4 gave the same p50 and more scheduling waits, p99 spikes of
# 75-160 ms in 3 of 16 PostgreSQL measurements against none in 16 with 2 (http_bench.py)
READERS = 2
T = TypeVar("T")


@cache
def entity_readers() -> ThreadPoolExecutor:
    """The few threads the entity reads run in (`asof`, `history`, server/fastpath.py's
    and the routes'): a read is blocking I/O (PostgreSQL: a round trip on the thread's
    own connection, ledger/readers/pg_pipeline.py; SQLite: the file), so it never runs on the
    event loop, where it would stall every other request; and a burst of them makes
    READERS threads and connections, not one per request.

    Threads of their own, not the event loop's default pool (anyio's `to_thread`): that
    pool ends a thread after 10 s idle, and its PostgreSQL connection with it, so a
    worker left idle for a while (all of a client's keep-alive connections on the other
    worker) paid a new connection per thread on its next burst -- ~150 ms each, seen as
    p99 spikes of 80-800 ms in bench/http_bench.py. These live as long as the process."""
    return ThreadPoolExecutor(READERS, thread_name_prefix="feedledger-reader")


async def in_reader(read: Callable[[], T]) -> T:
    """`read()` run in one of the entity readers' threads (see `entity_readers`)."""
    return await asyncio.get_running_loop().run_in_executor(entity_readers(), read)


def instant(text: str | None, tz: str, what: str) -> datetime | None:
    """A time in a query parameter, as the CLI takes it: YYYY-MM-DD (00:00 in the
    source's timezone) or ISO-8601; ConfigError (422) if malformed."""
    if text is None or text == "":
        return None
    return parse_instant(text, tz, what=what)


def entity_key(src: fl.Source, segment: str) -> str | list[str]:
    """An entity key from its URL path segment. A single-field key is its value as it
    is. A compound key is its values in key-field order separated by commas, a comma
    or backslash inside a value escaped with a backslash (`08,0714`, `a\\,b,c`), or
    the CLI's JSON array (`["08","0714"]`, URL-encoded)."""
    if len(src.config.key) == 1 or segment.lstrip().startswith("["):
        return segment
    values: list[str] = []
    current: list[str] = []
    chars = iter(segment)
    for ch in chars:
        if ch == "\\":
            current.append(next(chars, "\\"))
        elif ch == ",":
            values.append("".join(current))
            current = []
        else:
            current.append(ch)
    values.append("".join(current))
    if len(values) != len(src.config.key):
        raise fl.ConfigError(
            f"key {segment!r}: give {len(src.config.key)} comma-separated values, one per "
            f"key field {list(src.config.key)} (escape a comma in a value as \\,)",
            source=src.name,
        )
    return values
