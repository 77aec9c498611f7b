"""Subscribers and notification delivery: what the CLI and the scheduler call (the
feature's orchestration; its storage is notify/subscriptions.py, deliveries.py, fanout.py
and cancellations.py over notify/tables.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from feedledger.context import Context
from feedledger.ledger.runs.lookup import get_run
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.source import check_name
from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries, subscriptions
from feedledger.notify.corrections import queue_correction
from feedledger.notify.dispatch import DispatchReport, Policy, Progress, dispatch
from feedledger.notify.subscriptions import DIGESTS, Subscriber, is_env_name


def add_subscriber(
    ctx: Context,
    name: str,
    *,
    webhook: str | None,
    file: str | None,
    secret_env: str | None,
    sources: str | None,
    digest: str,
) -> tuple[Subscriber, list[str]]:
    """Validate and store a subscriber; returns it and any warnings."""
    warnings: list[str] = []
    check_name(name, "subscriber")
    if secret_env is not None and not is_env_name(secret_env):
        # never echoed: it may be the secret itself
        raise ConfigError(
            "--secret-env must name an environment variable, not hold the secret",
            hint="e.g. --secret-env HOOK_SECRET with HOOK_SECRET=whsec_... in the "
            "dispatcher's environment",
        )
    if (webhook is None) == (file is None):
        raise ConfigError("give exactly one of --webhook URL or --file PATH")
    if webhook is not None:
        _check_url(webhook)
    if digest not in DIGESTS:
        raise ConfigError(f"--digest must be one of {', '.join(DIGESTS)}, not {digest!r}")
    wanted: tuple[str, ...] | None = None
    if sources:
        wanted = tuple(s.strip() for s in sources.split(",") if s.strip())
        known = set(ctx.workspace.sources)
        unknown = [s for s in wanted if s not in known]
        if unknown:
            raise ConfigError(
                f"unknown source(s) {', '.join(unknown)} in --sources",
                hint="declared sources: " + (", ".join(sorted(known)) or "none"),
            )
    if secret_env is not None and secret_env not in os.environ:
        warnings.append(
            f"{secret_env} is not set in this environment: deliveries to {name} will fail "
            "(and be retried) until the dispatching process has it"
        )
    target = webhook if webhook is not None else str(Path(file or "").resolve())
    sub = Subscriber(
        name=name,
        kind="webhook" if webhook is not None else "file",
        target=target,
        secret_env=secret_env,
        sources=wanted,
        digest=digest,
        created_at=now_us(),
    )
    subscriptions.add(ctx.store, sub)
    return sub, warnings


def _check_url(url: str) -> None:
    import httpx  # lazy: httpx only when a webhook subscriber is added

    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError) as exc:
        raise ConfigError(f"--webhook {url!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(f"--webhook must be an http(s) URL with a host, not {url!r}")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--webhook {url!r}: port {port} is out of range")


def list_subscribers(ctx: Context) -> list[Subscriber]:
    return subscriptions.listing(ctx.store)


def remove_subscriber(ctx: Context, name: str) -> int:
    return subscriptions.remove(ctx.store, name)


def run_dispatch(
    ctx: Context,
    *,
    once: bool,
    policy: Policy,
    poll_s: float = 5.0,
    progress: Progress | None = None,
) -> DispatchReport:
    return dispatch(ctx.store, once=once, policy=policy, idle_s=poll_s, progress=progress)


def status(ctx: Context) -> dict[str, Any]:
    return deliveries.status(ctx.store, now_us())


def retry(ctx: Context, subscriber: str | None) -> int:
    if subscriber is not None and subscriber not in {s.name for s in list_subscribers(ctx)}:
        raise NotFoundError(f"no subscriber named {subscriber!r}")
    return deliveries.retry_dead(ctx.store, subscriber)


def correction(ctx: Context, run_id: str, message: str) -> dict[str, Any]:
    """Queue ONE correction naming a run whose notifications went out wrongly."""
    if not message.strip():
        raise ConfigError("--message must say what was wrong")
    run = get_run(ctx.store, run_id)
    if run is None:
        raise NotFoundError(f"unknown run id {run_id!r}", hint="`feedledger runs SOURCE`")
    queued = queue_correction(
        ctx.store, source=run.source, run_id=run_id, run_kind=run.kind, text=message
    )
    return {"source": run.source, "run_id": run_id, "message": message, "queued": queued}
