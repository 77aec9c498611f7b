"""Deliver due messages: webhooks over httpx (async, bounded concurrency per subscriber,
every subscriber concurrently so a slow or dead one holds up no other), JSON-lines
files (appended and fsynced). At least once: a delivery is marked `delivered` only
after a 2xx answer (or the fsync); a failure is retried with exponential backoff and
full jitter, no sooner than a `Retry-After` asks, and after `max_attempts` it is `dead`
(`notify retry` revives it). A crash between sending and marking re-sends the message
later with the same `webhook-id`, which is what lets the receiver deduplicate.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path

from feedledger import faults
from feedledger.ledger import deliveries
from feedledger.ledger.deliveries import Due, Outcome
from feedledger.ledger.store import Store
from feedledger.ledger.subscriptions import Subscriber, listing
from feedledger.model.timeutil import now_us
from feedledger.notify.signing import headers


@dataclass(frozen=True)
class Policy:
    max_attempts: int = 8
    backoff_base_s: float = 2.0
    backoff_max_s: float = 3600.0
    timeout_s: float = 10.0
    concurrency: int = 16  # in-flight requests per subscriber
    batch: int = 2000  # deliveries read per round


@dataclass
class DispatchReport:
    messages_created: int = 0
    attempted: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    seconds: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)  # subscriber -> last error

    def to_json(self) -> dict[str, object]:
        return {
            "messages_created": self.messages_created,
            "attempted": self.attempted,
            "delivered": self.delivered,
            "failed": self.failed,
            "dead": self.dead,
            "seconds": round(self.seconds, 3),
            "errors": self.errors,
        }


def backoff_s(attempts: int, policy: Policy, rng: random.Random) -> float:
    """Full-jitter exponential backoff after the `attempts`-th failed attempt."""
    cap = min(policy.backoff_max_s, policy.backoff_base_s * (2 ** max(0, attempts - 1)))
    return rng.uniform(cap / 2, cap)


def retry_after_s(value: str | None) -> float | None:
    """`Retry-After`: delta seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _failure(
    d: Due, policy: Policy, rng: random.Random, code: int | None, error: str, wait: float | None
) -> Outcome:
    attempts = d.attempts + 1
    delay = max(backoff_s(attempts, policy, rng), wait or 0.0)
    return Outcome(
        delivery_id=d.delivery_id,
        ok=False,
        status_code=code,
        error=error[:500],
        next_attempt_at=now_us() + int(delay * 1e6),
        dead=attempts >= policy.max_attempts,
    )


async def _send_webhook(
    client: object, sub: Subscriber, batch: Sequence[Due], policy: Policy, rng: random.Random
) -> list[Outcome]:
    import httpx

    assert isinstance(client, httpx.AsyncClient)
    secret: str | None = None
    if sub.secret_env:
        secret = os.environ.get(sub.secret_env)
        if secret is None:
            error = f"signing secret variable {sub.secret_env} is not set; nothing was sent"
            return [_failure(d, policy, rng, None, error, None) for d in batch]

    async def one(d: Due) -> Outcome:
        body = d.body.encode("utf-8")
        try:
            resp = await client.post(
                sub.target,
                content=body,
                headers=headers(secret, d.message_id, int(time.time()), body),
                timeout=policy.timeout_s,
            )
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, OSError) as exc:
            # a bad URL is this subscriber's failure, never the whole batch's
            return _failure(d, policy, rng, None, f"{type(exc).__name__}: {exc}", None)
        if 200 <= resp.status_code < 300:
            return Outcome(d.delivery_id, True, resp.status_code, None, 0, False)
        wait = retry_after_s(resp.headers.get("retry-after"))
        return _failure(d, policy, rng, resp.status_code, f"HTTP {resp.status_code}", wait)

    # a fixed set of workers pulling from the batch (not one task per message): bounded
    # concurrency per subscriber with no pile of waiting tasks
    results: list[Outcome | None] = [None] * len(batch)
    todo = iter(range(len(batch)))

    async def worker() -> None:
        for i in todo:
            results[i] = await one(batch[i])

    await asyncio.gather(*(worker() for _ in range(min(policy.concurrency, len(batch)))))
    return [r for r in results if r is not None]


def _write_file(
    sub: Subscriber, batch: Sequence[Due], policy: Policy, rng: random.Random
) -> list[Outcome]:
    lines = "".join(
        json.dumps({"webhook-id": d.message_id, "body": json.loads(d.body)}, ensure_ascii=False)
        + "\n"
        for d in batch
    )
    try:
        path = Path(sub.target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return [
            _failure(d, policy, rng, None, f"cannot write {sub.target}: {exc}", None) for d in batch
        ]
    return [Outcome(d.delivery_id, True, None, None, 0, False) for d in batch]


async def _round(
    store: Store,
    subs: dict[str, Subscriber],
    policy: Policy,
    rng: random.Random,
    report: DispatchReport,
    cursor: list[int],
) -> int:
    """One attempt at each due delivery after the cursor; returns how many."""
    import httpx

    batch = deliveries.due(store, now_us(), policy.batch, after_id=cursor[0])
    if not batch:
        return 0
    cursor[0] = batch[-1].delivery_id
    by_sub: dict[str, list[Due]] = {}
    for d in batch:
        by_sub.setdefault(d.subscriber, []).append(d)
    # one client (connection pool) per subscriber: a slow receiver's connections never
    # crowd another's, and a small pool keeps httpcore's per-request bookkeeping cheap
    limits = httpx.Limits(
        max_connections=policy.concurrency, max_keepalive_connections=policy.concurrency
    )

    async def for_sub(name: str, items: list[Due]) -> list[Outcome]:
        sub = subs[name]
        if sub.kind == "file":
            return await asyncio.to_thread(_write_file, sub, items, policy, rng)
        async with httpx.AsyncClient(limits=limits) as client:
            return await _send_webhook(client, sub, items, policy, rng)

    results = await asyncio.gather(*(for_sub(n, items) for n, items in by_sub.items()))
    outcomes = [o for group in results for o in group]
    faults.point("after_send")  # sent, not yet marked: a crash here re-sends the same ids
    deliveries.record(store, outcomes, now_us())
    for name, group in zip(by_sub, results, strict=True):
        for o in group:
            report.attempted += 1
            if o.ok:
                report.delivered += 1
            else:
                report.dead += int(o.dead)
                report.failed += int(not o.dead)
                report.errors[name] = o.error or ""
    return len(batch)


def dispatch(
    store: Store,
    *,
    once: bool = True,
    policy: Policy | None = None,
    idle_s: float = 5.0,
    should_stop: Callable[[], bool] = lambda: False,
    seed: int | None = None,
) -> DispatchReport:
    """Fan out pending outbox rows, then deliver what is due: once (every due message
    gets one attempt), or until `should_stop` (polling every `idle_s` when idle)."""
    policy = policy or Policy()
    rng = random.Random(seed)
    report = DispatchReport()
    start = time.perf_counter()
    while True:
        subs = {s.name: s for s in listing(store)}
        report.messages_created += deliveries.expand(store, list(subs.values()), now_us())
        cursor = [0]  # one pass over what is due: each message gets one attempt
        while asyncio.run(_round(store, subs, policy, rng, report, cursor)):
            pass
        if once or should_stop():
            break
        time.sleep(idle_s)
    report.seconds = time.perf_counter() - start
    return report
