"""One subscriber's stream: a feeder claiming its due messages a batch at a time, and
workers sending them (webhook: `concurrency` workers, each with its own keep-alive
connection; JSON-lines file: one writer). Before sending, a claimed message is checked
against the cancel epoch (Invariant 11, see notify/dispatch.py)."""

from __future__ import annotations

import asyncio

from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries
from feedledger.notify.deliveries import Due, Outcome
from feedledger.notify.send import failure, post, signing_secret, write_lines
from feedledger.notify.session import Session
from feedledger.notify.subscriptions import Subscriber

__all__ = ["Stream"]


class Stream:
    """One subscriber's feeder and workers."""

    def __init__(self, sub: Subscriber, shared: Session, once: bool, idle_s: float) -> None:
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
        import httpx  # lazy: httpx only for a webhook subscriber

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
