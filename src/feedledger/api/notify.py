"""`Ledger.notify`: subscribers and the delivery of their notifications (the `notify/`
feature): `subscriber add|list|remove`, `notify dispatch|status|retry|correction`.

As everywhere in the API, each result's `to_json()` is exactly the CLI's `--json` for
the same command."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from feedledger.api.results import Raw
from feedledger.api.runs.pages import resolve_run
from feedledger.context import Context
from feedledger.model.timeutil import from_us


@dataclass(frozen=True)
class Subscriber(Raw):
    """Who hears about which sources, how (`secret_env`: the NAME of the variable holding
    the signing secret, masked when it is no variable name; `sources` None: all)."""

    name: str
    kind: str  # webhook | file
    target: str  # the URL, or the file's absolute path
    secret_env: str | None
    sources: tuple[str, ...] | None
    digest: str  # none | hourly | daily
    created_at: datetime
    warnings: tuple[str, ...] = field(default=(), compare=False)  # from `add`
    _raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, s: Any, warnings: Sequence[str] = ()) -> Subscriber:
        return cls(
            s.name,
            s.kind,
            s.target,
            s.secret_env_shown,
            s.sources,
            s.digest,
            from_us(s.created_at),
            tuple(warnings),
            s,
        )


@dataclass(frozen=True)
class Dispatched(Raw):
    """What a dispatch did (`errors`: subscriber -> its last error)."""

    messages_created: int
    attempted: int
    delivered: int
    failed: int  # to retry
    dead: int
    cancelled: int  # claimed, then cancelled by a retraction: not sent
    seconds: float
    errors: dict[str, str]
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> Dispatched:
        return cls(
            r.messages_created,
            r.attempted,
            r.delivered,
            r.failed,
            r.dead,
            r.cancelled,
            r.seconds,
            dict(r.errors),
            r,
        )


# (messages attempted so far, messages due if known, the report so far)
DispatchProgress = Callable[[int, int | None, Dispatched], None]


@dataclass(frozen=True)
class Deliveries:
    """One subscriber's messages by state (`claimed`: being sent now by a running
    dispatcher) and the age of its oldest waiting one."""

    subscriber: str
    pending: int
    failed: int
    delivered: int
    dead: int
    cancelled: int
    claimed: int
    oldest_pending_age_s: float | None


@dataclass(frozen=True)
class DeliveryStatus:
    """`notify status`: per subscriber, and the outbox rows per state."""

    subscribers: list[Deliveries]
    outbox: dict[str, int]
    _raw: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self._raw

    @classmethod
    def of(cls, data: dict[str, Any]) -> DeliveryStatus:
        names = Deliveries.__dataclass_fields__
        subs = [
            Deliveries(**{k: v for k, v in s.items() if k in names}) for s in data["subscribers"]
        ]
        return cls(subs, dict(data["outbox"]), data)


@dataclass(frozen=True)
class Correction:
    """A correction queued for a run (`queued` False: the same one already was)."""

    source: str
    run_id: str
    message: str
    queued: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "run_id": self.run_id,
            "message": self.message,
            "queued": self.queued,
        }


class Notifications:
    """`led.notify`: the subscribers of the workspace `context` and their deliveries."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def subscribers(self) -> list[Subscriber]:
        """Subscribers, by name."""
        from feedledger.notify.operations import list_subscribers  # lazy: SQLAlchemy, Arrow

        return [Subscriber.of(s) for s in list_subscribers(self.context)]

    def add_subscriber(
        self,
        name: str,
        *,
        webhook: str | None = None,
        file: str | os.PathLike[str] | None = None,
        secret_env: str | None = None,
        sources: Sequence[str] | str | None = None,
        digest: str = "none",
    ) -> Subscriber:
        """Add a subscriber: exactly one of `webhook` (an http(s) URL) or `file` (a
        JSON-lines file); `secret_env` names the variable holding the signing secret;
        `sources` (default all) must be declared; `digest` none | hourly | daily. Its
        `warnings` say what will fail later (the secret's variable not set here)."""
        from feedledger.notify.operations import add_subscriber  # lazy: SQLAlchemy, Arrow

        wanted = sources if sources is None or isinstance(sources, str) else ",".join(sources)
        sub, warnings = add_subscriber(
            self.context,
            name,
            webhook=webhook,
            file=os.fspath(file) if file is not None else None,
            secret_env=secret_env,
            sources=wanted,
            digest=digest,
        )
        return Subscriber.of(sub, warnings)

    def remove_subscriber(self, name: str) -> int:
        """Remove a subscriber; returns how many undelivered messages were cancelled."""
        from feedledger.notify.operations import remove_subscriber  # lazy: SQLAlchemy, Arrow

        return remove_subscriber(self.context, name)

    def dispatch(
        self,
        *,
        once: bool = True,
        max_attempts: int = 8,
        backoff_s: float = 2.0,
        timeout_s: float = 10.0,
        concurrency: int = 16,
        batch: int = 256,
        poll_s: float = 5.0,
        progress: DispatchProgress | None = None,
    ) -> Dispatched:
        """Fan pending outbox rows out into messages and deliver what is due: `once`, one
        attempt at every message due; otherwise until SIGINT / SIGTERM."""
        from feedledger.notify.dispatch import Policy  # lazy: httpx
        from feedledger.notify.operations import run_dispatch  # lazy: SQLAlchemy, Arrow

        policy = Policy(
            max_attempts=max_attempts,
            backoff_base_s=backoff_s,
            timeout_s=timeout_s,
            concurrency=concurrency,
            batch=batch,
        )
        step = None
        if progress is not None:
            shown = progress

            def step(attempted: int, total: int | None, report: Any) -> None:
                shown(attempted, total, Dispatched.of(report))

        report = run_dispatch(self.context, once=once, policy=policy, poll_s=poll_s, progress=step)
        return Dispatched.of(report)

    def status(self) -> DeliveryStatus:
        """Per subscriber: messages by state and the oldest waiting one's age."""
        from feedledger.notify.operations import status  # lazy: SQLAlchemy, Arrow

        return DeliveryStatus.of(status(self.context))

    def retry(self, subscriber: str | None = None) -> int:
        """Make dead-lettered messages pending again (same ids); returns how many."""
        from feedledger.notify.operations import retry  # lazy: SQLAlchemy, Arrow

        return retry(self.context, subscriber)

    def correction(self, run_id: str, message: str) -> Correction:
        """Queue ONE correction naming a run (any unique prefix of its id) whose
        notifications went out wrongly."""
        from feedledger.notify.operations import correction  # lazy: SQLAlchemy, Arrow

        run = resolve_run(self.context, run_id)
        data = correction(self.context, run, message)
        return Correction(data["source"], data["run_id"], data["message"], data["queued"])
