"""Work run ahead of its reader in a thread of its own, through a small bounded queue.

`run_ahead(work)` starts `work(put)` in a daemon thread and returns a generator of what
it puts: `put` blocks while `depth` items wait, so the worker is never more than that
far ahead (memory bounded whatever the size), and the reader's own work overlaps the
worker's wherever either lets go of the GIL (drivers, Arrow, polars, numpy, I/O). An
exception in the worker is raised in the reader, at its place in the stream. A reader
that stops early (closes the generator) stops the worker: its next `put` raises
`Stopped`, which ends the thread quietly. `ahead(items)` runs an iterator that way.

Used by the snapshot's store fetch (ledger/readers/arrow_fetch.py, ledger/readers/snapshot_rows.py),
the HTTP snapshot's writer thread (api/snapshot_stream.py), and the pipeline's stages
(pipeline/intake/stages.py: one call started ahead of the step that needs its result).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar

__all__ = ["Stopped", "ahead", "run_ahead"]

T = TypeVar("T")
_END = object()
_POLL_S = 0.2


class Stopped(Exception):
    """The reader went away: raised by `put` in the worker, ending it."""


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def run_ahead(
    work: Callable[[Callable[[T], None]], None],
    *,
    depth: int = 2,
    name: str = "feedledger-ahead",
    join_s: float | None = None,
    started: bool = False,
) -> Generator[T, None, None]:
    """What `work(put)` puts, in order, `work` running in a thread (see the module doc);
    a reader that stops waits for the worker to end, `join_s` seconds at most if given
    (the daemon thread then ends at its next `put`). The thread starts at the first
    read, or at once when `started` (the generator must then be read or closed)."""
    out: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> None:
        while True:
            if stop.is_set():
                raise Stopped
            try:
                out.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def run() -> None:
        try:
            work(put)
            put(_END)
        except Stopped:
            return
        except BaseException as exc:  # handed to the reader, raised there
            try:
                put(_Raised(exc))
            except Stopped:
                return

    worker = threading.Thread(target=run, name=name, daemon=True)
    if started:
        worker.start()

    def read() -> Generator[T, None, None]:
        if not started:
            worker.start()
        try:
            while True:
                item = out.get()
                if item is _END:
                    return
                if isinstance(item, _Raised):
                    raise item.exc
                yield item  # type: ignore[misc]
        finally:
            stop.set()
            worker.join(join_s)

    return read()


def ahead(
    items: Iterator[T], *, depth: int = 2, name: str = "feedledger-ahead"
) -> Generator[T, None, None]:
    """`items` iterated in a thread, up to `depth` items ahead of the reader; `items`
    is closed (if it can be) when the worker ends, however it ends."""

    def work(put: Callable[[T], None]) -> None:
        try:
            for item in items:
                put(item)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    return run_ahead(work, depth=depth, name=name)
