"""Deliver due messages, at least once, each subscriber on its own stream.

Each subscriber has a stream: a feeder claims its due messages a batch at a time
(`deliveries.claim`: no other dispatcher sends them meanwhile) and workers send them --
for a webhook, `concurrency` workers each with its own keep-alive connection (httpx,
async); for a JSON-lines file, one writer appending and fsyncing what is queued. A slow
or dead subscriber only slows its own stream. Outcomes are recorded in batches (at most
`flush_every`, at most `flush_s` after the first of them), which also clears their
claims. Every database call runs on one thread beside the event loop, so sending never
waits for the store.

A crash between sending and recording leaves the messages pending: claims of a dead
process on this host are void at once, any other claim lapses at `claimed_until`, and
the messages are sent again with the same `webhook-id`, which is what lets the receiver
deduplicate. On an error in this process the claims are released before it ends.

Invariant 11: a retraction cancels its runs' undelivered messages, claimed ones too.
Before sending, a worker reads the store's cancel epoch again (shared for RECHECK_S);
when it has moved, the stream's claimed, unsent messages are looked up and the
cancelled ones are not sent (counted `cancelled`, claims cleared).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from feedledger import faults
from feedledger.ledger.holders import new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import cancellations, deliveries, fanout
from feedledger.notify.deliveries import Due, Outcome
from feedledger.notify.send import Policy, failure, post, signing_secret, write_lines
from feedledger.notify.subscriptions import Subscriber, listing

__all__ = ["DispatchReport", "Policy", "Progress", "dispatch"]

T = TypeVar("T")
# progress(attempted, due at the start or None, report so far); called on the store thread
Progress = Callable[[int, int | None, "DispatchReport"], None]
WAL_CHECKPOINT_BYTES = 32 << 20
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


class _Shared:
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
        batch = self._take()
        if batch:
            await self.db(self._record, batch)

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
        """After the event loop: record what was sent (unless a crash is being
        simulated), give up the remaining claims, stop the database thread."""
        try:
            if not self.crashed and self.unrecorded:
                self._record(self.unrecorded)
                self.unrecorded = []
        finally:
            try:
                deliveries.release(self.store, self.holder)
            finally:
                self.executor.shutdown()
                self.reader.shutdown()


class _Stream:
    """One subscriber's feeder and workers."""

    def __init__(self, sub: Subscriber, shared: _Shared, once: bool, idle_s: float) -> None:
        self.sub = sub
        self.shared = shared
        self.once = once
        self.idle_s = idle_s
        self.wake = asyncio.Event()
        policy = shared.policy
        self.workers = policy.concurrency if sub.kind == "webhook" else 1
        self.queue: asyncio.Queue[Due | None] = asyncio.Queue(maxsize=policy.batch)
        # claimed, not yet taken by a worker (ids, in order), and those found cancelled
        # since; the cancel epoch all of them are known to be still waiting at
        self.claimed: dict[int, None] = {}
        self.gone: set[int] = set()
        self.epoch: int | None = None

    async def run(self) -> None:
        work = self._webhook if self.sub.kind == "webhook" else self._file
        async with asyncio.TaskGroup() as tg:  # one failing cancels the others
            tg.create_task(self._feed())
            for _ in range(self.workers):
                tg.create_task(work())

    async def _feed(self) -> None:
        s, policy = self.shared, self.shared.policy
        ttl_us = int(policy.claim_ttl_s * 1e6)
        cursor = 0  # one pass: each due message gets one attempt
        while True:
            now = now_us()
            got = await s.db(
                deliveries.claim,
                s.store,
                self.sub.name,
                s.holder,
                now,
                now + ttl_us,
                policy.batch,
                cursor,
            )
            if got:
                cursor = got[-1].delivery_id
                for d in got:
                    self.claimed[d.delivery_id] = None
                    await self.queue.put(d)
                continue
            if self.once:
                break
            cursor = 0
            self.wake.clear()
            try:
                async with asyncio.timeout(self.idle_s):
                    await self.wake.wait()
            except TimeoutError:
                pass
        for _ in range(self.workers):
            await self.queue.put(None)

    async def sendable(self, batch: list[Due]) -> tuple[list[Due], list[Outcome]]:
        """(the claimed messages still to be sent, outcomes for those a retraction has
        cancelled since their claim: not sent). Invariant 11: before sending, the cancel
        epoch is read again (one indexed read, shared by the streams for RECHECK_S);
        only if a retraction has cancelled anything since, every message of this stream
        claimed and not yet sent is looked up."""
        for d in batch:
            self.claimed.pop(d.delivery_id, None)
        epoch = await self.shared.cancel_epoch()
        if epoch != self.epoch:
            ids = [d.delivery_id for d in batch] + list(self.claimed)
            gone = await self.shared.read(deliveries.not_waiting, self.shared.store, ids)
            self.gone.update(gone)
            self.epoch = epoch
        keep, skipped = [], []
        for d in batch:
            if d.delivery_id in self.gone:
                self.gone.discard(d.delivery_id)
                skipped.append(Outcome(d.delivery_id, False, None, None, 0, False, skipped=True))
            else:
                keep.append(d)
        return keep, skipped

    async def _webhook(self) -> None:
        import httpx

        s, policy = self.shared, self.shared.policy
        secret, missing = signing_secret(self.sub)
        if s.ssl is None and self.sub.target.lower().startswith("https:"):
            s.ssl = httpx.create_ssl_context()
        # one connection per worker: httpcore's shared pool spends more time matching
        # requests to connections than sending them when many are in flight
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(
            limits=limits, timeout=policy.timeout_s, verify=s.ssl or False
        ) as client:
            while (d := await self.queue.get()) is not None:
                _sendable, skipped = await self.sendable([d])
                if skipped:
                    await s.add(self.sub.name, skipped)
                    continue
                if missing:
                    outcome = failure(d, policy, s.rng, None, missing, None)
                else:
                    outcome = await post(client, self.sub, secret, d, policy, s.rng)
                await s.add(self.sub.name, [outcome])

    async def _file(self) -> None:
        s = self.shared
        done = False
        while not done and (d := await self.queue.get()) is not None:
            items = [d]
            while not self.queue.empty():
                more = self.queue.get_nowait()
                if more is None:
                    done = True
                    break
                items.append(more)
            items, skipped = await self.sendable(items)
            outcomes = skipped
            if items:
                outcomes += await asyncio.to_thread(write_lines, self.sub, items, s.policy, s.rng)
            await s.add(self.sub.name, outcomes)


async def _serve(
    shared: _Shared, once: bool, idle_s: float, should_stop: Callable[[], bool]
) -> None:
    store, report = shared.store, shared.report
    streams: dict[str, tuple[_Stream, asyncio.Task[None]]] = {}
    stop = asyncio.Event()
    if not once:  # Ctrl-C or SIGTERM: stop sending, record what was sent, release the rest
        _on_signals(stop.set)
    async with asyncio.TaskGroup() as tg:
        ticker = tg.create_task(shared.tick())
        while True:
            subs = await shared.db(listing, store)
            created = await shared.db(fanout.expand, store, subs, now_us())
            report.messages_created += created
            if once:
                shared.total = await shared.db(deliveries.count_due, store, now_us())
            current = {s.name: s for s in subs}
            for name, (stream, task) in list(streams.items()):
                if current.get(name) != stream.sub:  # removed or changed: start afresh
                    task.cancel()
                    del streams[name]
            for sub in subs:
                if sub.name not in streams:
                    stream = _Stream(sub, shared, once, idle_s)
                    streams[sub.name] = (stream, tg.create_task(stream.run()))
                elif created:
                    streams[sub.name][0].wake.set()
            if once:  # each stream ends when nothing more is due
                await asyncio.gather(*(task for _stream, task in streams.values()))
                break
            await shared.db(_checkpoint_if_large, store)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(idle_s):
                    await stop.wait()
            if stop.is_set() or should_stop():
                # a request cut short is unrecorded: its message goes again, same id
                for _stream, task in streams.values():
                    task.cancel()
                await asyncio.gather(
                    *(task for _stream, task in streams.values()), return_exceptions=True
                )
                break
        ticker.cancel()
        await shared.flush()


def _checkpoint_if_large(store: Store) -> None:
    """A long-running dispatcher's SQLite log is copied into the database now and then
    (automatic checkpoints are off, see ledger/engine.py)."""
    if store.wal_bytes() > WAL_CHECKPOINT_BYTES:
        store.checkpoint()


def _on_signals(callback: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, callback)


def dispatch(
    store: Store,
    *,
    once: bool = True,
    policy: Policy | None = None,
    idle_s: float = 5.0,
    should_stop: Callable[[], bool] = lambda: False,
    seed: int | None = None,
    progress: Progress | None = None,
) -> DispatchReport:
    """Fan pending outbox rows out into messages, then deliver what is due: once (every
    due message gets one attempt), or until `should_stop` or SIGINT / SIGTERM (new
    outbox rows are fanned out every `idle_s`; a subscriber with nothing due looks
    again as often)."""
    report = DispatchReport()
    shared = _Shared(store, policy or Policy(), report, seed, progress)
    start = time.perf_counter()
    try:
        asyncio.run(_serve(shared, once, idle_s, should_stop))
    except BaseExceptionGroup as group:
        raise _first(group) from None
    finally:
        shared.close()
        report.seconds = time.perf_counter() - start
    return report


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
