"""One attempt at one message: a webhook POST (httpx, async) or a JSON-lines append,
turned into an `Outcome` -- delivered on a 2xx answer (or after the fsync), otherwise a
failure due again after exponential backoff with full jitter, no sooner than a
`Retry-After` asks, and `dead` at the last attempt.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.model.timeutil import now_us
from feedledger.notify.deliveries import Due, Outcome
from feedledger.notify.signing import headers
from feedledger.notify.subscriptions import Subscriber, is_env_name

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class Policy:
    max_attempts: int = 8
    backoff_base_s: float = 2.0
    backoff_max_s: float = 3600.0
    timeout_s: float = 10.0  # connect, write and read each; the whole request at most 2x+1
    concurrency: int = 16  # in-flight requests per subscriber
    batch: int = 256  # messages claimed per subscriber at a time
    flush_every: int = 500  # outcomes recorded per transaction, at most
    flush_s: float = 1.0  # ... and no later than this after the first of them

    @property
    def request_deadline_s(self) -> float:
        return self.timeout_s * 2 + 1

    @property
    def claim_ttl_s(self) -> float:
        """How long a claim holds: a claimed message waits behind at most two claims'
        worth of messages per in-flight slot, each at most one request deadline, then
        waits to be recorded."""
        rounds = -(-2 * self.batch // self.concurrency) + 1
        return 30 + self.flush_s + rounds * self.request_deadline_s


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


def failure(
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


def signing_secret(sub: Subscriber) -> tuple[str | None, str | None]:
    """(secret, error): the subscriber's secret from the environment, or why not."""
    if not sub.secret_env:
        return None, None
    if not is_env_name(sub.secret_env):  # an older store may hold the secret itself
        return None, (
            "the subscriber's secret_env is not an environment variable name (never "
            "shown); re-add it with --secret-env VAR; nothing was sent"
        )
    secret = os.environ.get(sub.secret_env)
    if secret is None:
        return None, f"signing secret variable {sub.secret_env} is not set; nothing was sent"
    return secret, None


async def post(
    client: httpx.AsyncClient,
    sub: Subscriber,
    secret: str | None,
    d: Due,
    policy: Policy,
    rng: random.Random,
) -> Outcome:
    import httpx  # lazy: httpx only when a webhook is sent

    body = d.body.encode("utf-8")
    try:
        async with asyncio.timeout(policy.request_deadline_s):
            resp = await client.post(
                sub.target,
                content=body,
                headers=headers(secret, d.message_id, int(time.time()), body),
            )
    except TimeoutError:
        error = f"Timeout: no complete answer within {policy.request_deadline_s:g} s"
        return failure(d, policy, rng, None, error, None)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, OSError) as exc:
        # a bad URL is this message's failure, never the dispatcher's
        return failure(d, policy, rng, None, describe(exc, sub.target), None)
    if 200 <= resp.status_code < 300:
        return Outcome(d.delivery_id, True, resp.status_code, None, 0, False)
    wait = retry_after_s(resp.headers.get("retry-after"))
    return failure(d, policy, rng, resp.status_code, f"HTTP {resp.status_code}", wait)


_PHASES = (  # httpx exception class name -> what the client was doing
    (("ConnectError", "ConnectTimeout", "PoolTimeout"), "while connecting to"),
    (("WriteError", "WriteTimeout"), "while sending the request to"),
    (("ReadError", "ReadTimeout", "RemoteProtocolError"), "while reading the response from"),
)


def describe(exc: BaseException, target: str) -> str:
    """One line for a failed request: the exception's type, then the first message found
    along its `__cause__` / `__context__` chain (httpx often raises with an empty one,
    e.g. `ReadError()` over a reset connection), naming the underlying type where it
    differs, and what was being done to which host. Never an empty message."""
    name = type(exc).__name__
    detail, origin = "", name
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        text = str(link).strip()
        if text:
            detail, origin = text, type(link).__name__
            break
        link = link.__cause__ or link.__context__
    if not detail:
        detail = "no further detail"
    elif origin != name:
        detail = f"{detail} ({origin})"
    phase = next((what for names, what in _PHASES if name in names), None)
    if phase is not None:
        detail += f" {phase} {_host(target)}"
    return f"{name}: {detail}"


def _host(target: str) -> str:
    import httpx  # lazy: httpx only for a webhook's failure

    try:
        url = httpx.URL(target)
    except (httpx.InvalidURL, ValueError):
        return "the webhook"
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


def write_lines(
    sub: Subscriber, batch: Sequence[Due], policy: Policy, rng: random.Random
) -> list[Outcome]:
    """Append the messages to the subscriber's JSON-lines file, fsynced."""
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
            failure(d, policy, rng, None, f"cannot write {sub.target}: {exc}", None) for d in batch
        ]
    return [Outcome(d.delivery_id, True, None, None, 0, False) for d in batch]
