"""One dispatch's shared state: the store, reached through a database thread (writes)
and a reader thread (the looks before sending), the holder name of its claims, the
delivery policy, the cancel epoch as last read, and the outcomes sent but not yet
recorded -- recorded in batches, which also clears their claims (see notify/dispatch.py).
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from feedledger import faults
from feedledger.ledger.runs.holders import new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import cancellations, deliveries
from feedledger.notify.deliveries import Outcome
from feedledger.notify.send import Policy

__all__ = ["RECHECK_S", "DispatchReport", "Progress", "Session"]

T = TypeVar("T")
# progress(attempted, due at the start or None, report so far); called on the store thread
Progress = Callable[[int, int | None, "DispatchReport"], None]
# a claimed message is sent only if no retraction had cancelled anything (the cancel
# epoch) as of a read started at most this long before, or if looked up since
RECHECK_S = 0.05


@dataclass
class DispatchReport:
    messages_created: int = 0
    attempted: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0  # claimed, then cancelled by a retraction before sending: not sent
    seconds: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)  # subscriber -> last error

    def to_json(self) -> dict[str, object]:
        return {
            "messages_created": self.messages_created,
            "attempted": self.attempted,
            "delivered": self.delivered,
            "failed": self.failed,
            "dead": self.dead,
            "cancelled": self.cancelled,
            "seconds": round(self.seconds, 3),
            "errors": self.errors,
        }


class Session:
    """What every stream uses: the store (through the database thread), the holder
    name of this dispatcher's claims, the policy, and the outcomes not yet recorded."""

    def __init__(
        self,
        store: Store,
        policy: Policy,
        report: DispatchReport,
        seed: int | None,
        progress: Progress | None = None,
    ):
        self.store = store
        self.progress = progress
        self.total: int | None = None
        self.policy = policy
        self.report = report
        self.rng = random.Random(seed)
        self.holder = new_holder()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="feedledger-store")
        # the looks before sending (reads) never queue behind recording a batch
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="feedledger-recheck")
        self.epoch: int | None = None
        self.epoch_read_at = 0.0
        self.epoch_lock: asyncio.Lock | None = None
        self.unrecorded: list[tuple[str, Outcome]] = []
        self.orphans: list[Future[None]] = []  # batches taken by a task cancelled since
        self.first_unrecorded = 0.0
        self.crashed = False  # the fault point fired: record nothing more
        self.ssl: Any = None

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.reader, functools.partial(fn, *args))

    async def cancel_epoch(self) -> int:
        """The store's cancel epoch as read at most RECHECK_S ago (one read at a time;
        those asking meanwhile share the next)."""
        if self.epoch_lock is None:
            self.epoch_lock = asyncio.Lock()
        asked = time.monotonic()
        async with self.epoch_lock:
            if self.epoch is None or self.epoch_read_at < asked - RECHECK_S:
                self.epoch_read_at = time.monotonic()
                self.epoch = await self.read(cancellations.cancel_epoch, self.store)
            return self.epoch

    # -- recording outcomes -------------------------------------------------------------
    async def add(self, name: str, outcomes: list[Outcome]) -> None:
        if not self.unrecorded:
            self.first_unrecorded = time.monotonic()
        self.unrecorded.extend((name, o) for o in outcomes)
        if len(self.unrecorded) >= self.policy.flush_every:
            await self.flush()

    async def flush(self) -> None:
        """Record the outcomes not yet recorded. A batch once taken is recorded even if
        the task waiting for it is cancelled meanwhile (the ticker at the end of a
        dispatch, a worker on SIGTERM): its job is never cancelled -- a cancelled job
        the database thread had not started yet would drop the outcomes of messages
        already sent (they would go again, and the report would not count them)."""
        batch = self._take()
        if batch:
            job = self.executor.submit(self._record, batch)
            try:
                await asyncio.shield(asyncio.wrap_future(job))
            except asyncio.CancelledError:
                self.orphans.append(job)
                raise

    async def settle(self) -> None:
        """Wait for the batches whose waiting task was cancelled to be recorded (their
        errors are the dispatch's)."""
        jobs, self.orphans = self.orphans, []
        for job in jobs:
            await asyncio.wrap_future(job)

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(min(0.1, self.policy.flush_s))
            waited = time.monotonic() - self.first_unrecorded
            if self.unrecorded and waited >= self.policy.flush_s:
                await self.flush()

    def _take(self) -> list[tuple[str, Outcome]]:
        batch, self.unrecorded = self.unrecorded, []
        if batch:
            try:
                faults.point("after_send")  # sent, not yet marked: a crash re-sends the ids
            except BaseException:
                self.crashed = True
                raise
        return batch

    def _record(self, batch: list[tuple[str, Outcome]]) -> None:
        deliveries.record(self.store, self.holder, [o for _, o in batch], now_us())
        report = self.report
        for name, o in batch:
            if o.skipped:
                report.cancelled += 1
                continue
            report.attempted += 1
            if o.ok:
                report.delivered += 1
            else:
                report.dead += int(o.dead)
                report.failed += int(not o.dead)
                report.errors[name] = o.error or ""
        if self.progress:
            self.progress(report.attempted, self.total, report)

    def close(self) -> None:
        """After the event loop: let the database thread finish what it was given (a
        batch taken by a task cancelled since is recorded), record what was sent and not
        taken (unless a crash is being simulated), give up the remaining claims."""
        try:
            self.executor.shutdown()  # first: the store is used by one thread at a time
            if not self.crashed and self.unrecorded:
                self._record(self.unrecorded)
                self.unrecorded = []
        finally:
            try:
                deliveries.release(self.store, self.holder)
            finally:
                self.reader.shutdown()
