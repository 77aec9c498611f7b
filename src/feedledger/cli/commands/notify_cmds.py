"""`feedledger subscriber add|list|remove`, `feedledger notify dispatch|status|retry|correction`:
the public API's `Ledger.notify` (api/notify.py), rendered.

Messages are derived from the outbox; see notify/deliveries.py and notify/dispatch.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from feedledger.cli.common import JSON_OPT, emit_json, err, ledger, out, table, when

if TYPE_CHECKING:
    from feedledger.api.notify import Dispatched, DispatchProgress


def subscriber_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Subscriber name."),
    webhook: str | None = typer.Option(None, "--webhook", help="POST messages to this URL."),
    file: str | None = typer.Option(
        None, "--file", help="Append messages to this JSON-lines file instead (scripts, tests)."
    ),
    secret_env: str | None = typer.Option(
        None,
        "--secret-env",
        help="NAME of the environment variable holding the signing secret (Standard "
        "Webhooks; `whsec_…` or any text), never the secret itself. Only the NAME is "
        "stored.",
    ),
    sources: str | None = typer.Option(None, "--sources", help="Only these sources (A,B)."),
    digest: str = typer.Option(
        "none",
        "--digest",
        help="none: one message per change; hourly | daily: the changes of each UTC hour or "
        "day in one message, sent when it closes (run-level notices still go one by one).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Add a subscriber."""
    with ledger(ctx) as led:
        sub = led.notify.add_subscriber(
            name,
            webhook=webhook,
            file=file,
            secret_env=secret_env,
            sources=sources,
            digest=digest,
        )
    for w in sub.warnings:
        err.print(f"[yellow]warning:[/] {w}", markup=True)
    if json_out:
        emit_json(sub.to_json())
    else:
        out.print(f"subscriber {sub.name}: {sub.kind} {sub.target}")


def subscriber_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Subscribers, by name."""
    with ledger(ctx) as led:
        subs = led.notify.subscribers()
    if json_out:
        emit_json([s.to_json() for s in subs])
        return
    table(
        "subscribers",
        ["name", "kind", "target", "secret_env", "sources", "digest", "created_at"],
        [
            [
                s.name,
                s.kind,
                s.target,
                s.secret_env or "",
                ",".join(s.sources) if s.sources else "(all)",
                s.digest,
                when(s.created_at),
            ]
            for s in subs
        ],
    )


def subscriber_remove(ctx: typer.Context, name: str, json_out: bool = JSON_OPT) -> None:
    """Remove a subscriber (its undelivered messages are cancelled)."""
    with ledger(ctx) as led:
        cancelled = led.notify.remove_subscriber(name)
    if json_out:
        emit_json({"name": name, "removed": True, "cancelled": cancelled})
    else:
        out.print(f"removed subscriber {name} ({cancelled} undelivered message(s) cancelled)")


def notify_dispatch(
    ctx: typer.Context,
    once: bool = typer.Option(
        False, "--once", help="One attempt at everything due, then exit (default: keep polling)."
    ),
    max_attempts: int = typer.Option(8, "--max-attempts", min=1, help="Then dead-letter."),
    backoff: float = typer.Option(
        2.0, "--backoff", min=0.0, help="First retry delay in seconds (doubles, jittered)."
    ),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Per request, seconds."),
    concurrency: int = typer.Option(
        16, "--concurrency", min=1, help="Requests in flight per subscriber."
    ),
    batch: int = typer.Option(
        256,
        "--batch",
        min=1,
        help="Messages claimed per subscriber at a time (no other dispatcher sends them "
        "meanwhile).",
    ),
    poll: float = typer.Option(
        5.0,
        "--poll",
        min=0.05,
        help="Without --once: seconds between looks at the outbox (and at due retries).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Fan pending outbox rows out into messages and deliver what is due.

    With --once: one attempt at every message due, then a report. Without: keep
    dispatching until Ctrl-C or SIGTERM, then record what was sent, release what was
    not (it goes again, same ids) and report.

    Each subscriber is served on its own: a slow or dead one delays no other. Several
    dispatchers may run at once (on one host or many, sharing a PostgreSQL store): each
    message is claimed by one of them. A message is marked delivered only after a 2xx
    answer; a crash before that sends it again later with the same `webhook-id`.
    """
    with ledger(ctx) as led, _progress(quiet=json_out) as step:
        report = led.notify.dispatch(
            once=once,
            max_attempts=max_attempts,
            backoff_s=backoff,
            timeout_s=timeout,
            concurrency=concurrency,
            batch=batch,
            poll_s=poll,
            progress=step,
        )
    if json_out:
        emit_json(report.to_json())
        return
    out.print(
        f"{report.messages_created} message(s) queued; {report.attempted} attempted: "
        f"{report.delivered} delivered, {report.failed} to retry, {report.dead} dead "
        f"({report.seconds:.2f} s)"
    )
    if report.cancelled:
        out.print(f"{report.cancelled} claimed message(s) cancelled by a retraction: not sent")
    for name, error in report.errors.items():
        err.print(f"  {name}: {error}")


@contextmanager
def _progress(quiet: bool) -> Iterator[DispatchProgress | None]:
    """Messages attempted so far, on stderr (nothing when stderr is not a terminal)."""
    if quiet or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn  # lazy: bars only
    from rich.progress import Progress as Bar  # lazy: bars only

    with Bar(
        TextColumn("dispatch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def step(attempted: int, total: int | None, report: Dispatched) -> None:
            shown = f"{report.delivered} delivered, {report.failed} to retry, {report.dead} dead"
            bar.update(task, completed=attempted, total=total, description=shown)

        yield step


def notify_status(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Per subscriber: pending, failed (to retry), delivered, dead, cancelled, being sent
    now by a running dispatcher (claimed); the oldest pending message's age."""
    with ledger(ctx) as led:
        status = led.notify.status()
    data = status.to_json()
    if json_out:
        emit_json(data)
        return
    table(
        "deliveries",
        [
            "subscriber",
            "pending",
            "failed",
            "delivered",
            "dead",
            "cancelled",
            "sending now",
            "oldest pending s",
        ],
        [
            [
                s["subscriber"],
                s["pending"],
                s["failed"],
                s["delivered"],
                s["dead"],
                s["cancelled"],
                s["claimed"],
                s["oldest_pending_age_s"] if s["oldest_pending_age_s"] is not None else "",
            ]
            for s in data["subscribers"]
        ],
    )
    out.print("outbox: " + ", ".join(f"{k} {v}" for k, v in sorted(data["outbox"].items())))


def notify_retry(
    ctx: typer.Context,
    subscriber: str | None = typer.Option(None, "--subscriber", help="Only this subscriber."),
    json_out: bool = JSON_OPT,
) -> None:
    """Make dead-lettered messages pending again (same message ids)."""
    with ledger(ctx) as led:
        n = led.notify.retry(subscriber)
    if json_out:
        emit_json({"requeued": n, "subscriber": subscriber})
    else:
        out.print(f"{n} dead message(s) pending again")


def notify_correction(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The run whose notifications went out wrongly."),
    message: str = typer.Option(..., "--message", help="What subscribers should know."),
    json_out: bool = JSON_OPT,
) -> None:
    """Queue ONE correction naming RUN_ID, instead of retracting each alert."""
    with ledger(ctx) as led:
        queued = led.notify.correction(run_id, message)  # the whole id or a unique prefix
    if json_out:
        emit_json(queued.to_json())
    else:
        out.print(
            f"correction for run {queued.run_id} queued; `feedledger notify dispatch` sends it"
        )
