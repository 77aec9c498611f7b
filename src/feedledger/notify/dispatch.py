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

Here: the serving loop (fan-out, one stream per subscriber, signals) and `dispatch`;
notify/session.py holds what every stream shares (database threads, claims holder,
cancel epoch, outcomes to record), notify/stream.py one subscriber's feeder and workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries, fanout
from feedledger.notify.send import Policy
from feedledger.notify.session import DispatchReport, Progress, Session
from feedledger.notify.stream import Stream
from feedledger.notify.subscriptions import listing

__all__ = ["DispatchReport", "Policy", "Progress", "dispatch"]

WAL_CHECKPOINT_BYTES = 32 << 20


async def _serve(
    shared: Session, once: bool, idle_s: float, should_stop: Callable[[], bool]
) -> None:
    store, report = shared.store, shared.report
    streams: dict[str, tuple[Stream, asyncio.Task[None]]] = {}
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
                    stream = Stream(sub, shared, once, idle_s)
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
        ticker.cancel()  # its batch taken, if any, is recorded all the same
        await shared.flush()
        await shared.settle()


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
    shared = Session(store, policy or Policy(), report, seed, progress)
    start = time.perf_counter()
    try:
        _run_loop(lambda: _serve(shared, once, idle_s, should_stop))
    except BaseExceptionGroup as group:
        raise _first(group) from None
    finally:
        shared.close()
        report.seconds = time.perf_counter() - start
    return report


def _run_loop(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """asyncio.run(main()); called from a thread whose event loop is running (a
    notebook's, or Playwright's sync API, which marks its loop as running between
    calls), asyncio.run refuses: the loop of its own then runs in a thread of its own,
    this one waiting for it (SIGINT/SIGTERM then stay with the caller)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return
    failed: list[BaseException] = []

    def body() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=body, name="feedledger-dispatch")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
