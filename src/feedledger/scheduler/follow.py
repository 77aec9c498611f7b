"""The scheduler's Delta exports that follow a source's runs (`export delta --follow`),
queued on a thread of their own -- as the raw objects' compression is queued after a
payload is applied -- so a slow export never holds a worker: the next source's attempt
starts while the table is being written.

One thread, in order. A source whose export is already queued and not yet started is
not queued again: that export reads the source's watermark when it starts and so takes
every run applied by then (`lake.export.export`: the table's position is its own). A
failure is logged; the next run's export takes it up from the table's position.
Stopping drains the queue (each export is one Delta commit: a kill leaves nothing
half-visible, and the next export resumes from the table).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from feedledger.context import Context

__all__ = ["FollowQueue"]

Emit = Callable[[dict[str, Any]], None]


class FollowQueue:
    """The follow exports of one scheduler process."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="delta-export")
        self._lock = threading.Lock()
        self._pending: set[str] = set()  # queued, not started
        self._queued: list[Future[None]] = []

    def queue(self, ctx: Context, source: str) -> None:
        """Bring the tables following `source` up to date, after the work queued so far."""
        with self._lock:
            if source in self._pending:
                return
            self._pending.add(source)
        try:
            future = self._pool.submit(self._export, ctx, source)
        except RuntimeError:  # stopped (its queue drained): done here and now
            self._export(ctx, source)
            return
        with self._lock:
            self._queued = [f for f in self._queued if not f.done()] + [future]

    def _export(self, ctx: Context, source: str) -> None:
        from feedledger.lake.export import follow_run  # lazy: pyarrow, the delta extra

        with self._lock:
            self._pending.discard(source)
        try:
            for done in follow_run(ctx, source):
                self._emit({"event": "delta_export", **done.to_json()})
        except Exception as exc:
            self._emit({"event": "error", "source": source, "error": f"delta export: {exc}"})

    def settled(self) -> None:
        """Wait for the exports queued so far to end."""
        with self._lock:
            queued = list(self._queued)
        for future in queued:
            future.exception()  # (`_export` logs its failures and never raises)

    def shutdown(self) -> None:
        """Run what is queued, then stop (later calls export in the caller's thread)."""
        self._pool.shutdown(wait=True)
