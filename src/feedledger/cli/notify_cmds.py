"""`feedledger subscriber add|list|remove`, `feedledger notify dispatch|status|retry|correction`.

Messages are derived from the outbox; see notify/deliveries.py and notify/dispatch.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from feedledger.cli.common import JSON_OPT, context, emit_json, err, guarded, out, table, when

if TYPE_CHECKING:
    from feedledger.notify.dispatch import DispatchReport, Progress

subscriber_app = typer.Typer(help="Who hears about changes (webhooks, JSON-lines files).")
notify_app = typer.Typer(help="Deliver the outbox: at least once, signed, retried.")


@subscriber_app.command("add")
@guarded
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
    from feedledger.notify.operations import add_subscriber

    with context(ctx) as c:
        sub, warnings = add_subscriber(
            c,
            name,
            webhook=webhook,
            file=file,
            secret_env=secret_env,
            sources=sources,
            digest=digest,
        )
    for w in warnings:
        err.print(f"[yellow]warning:[/] {w}", markup=True)
    if json_out:
        emit_json(sub)
    else:
        out.print(f"subscriber {sub.name}: {sub.kind} {sub.target}")


@subscriber_app.command("list")
@guarded
def subscriber_list(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Subscribers, by name."""
    from feedledger.notify.operations import list_subscribers

    with context(ctx) as c:
        subs = list_subscribers(c)
    if json_out:
        emit_json(subs)
        return
    table(
        "subscribers",
        ["name", "kind", "target", "secret_env", "sources", "digest", "created_at"],
        [
            [
                s.name,
                s.kind,
                s.target,
                s.secret_env_shown or "",
                ",".join(s.sources) if s.sources else "(all)",
                s.digest,
                when(s.created_at),
            ]
            for s in subs
        ],
    )


@subscriber_app.command("remove")
@guarded
def subscriber_remove(ctx: typer.Context, name: str, json_out: bool = JSON_OPT) -> None:
    """Remove a subscriber (its undelivered messages are cancelled)."""
    from feedledger.notify.operations import remove_subscriber

    with context(ctx) as c:
        cancelled = remove_subscriber(c, name)
    if json_out:
        emit_json({"name": name, "removed": True, "cancelled": cancelled})
    else:
        out.print(f"removed subscriber {name} ({cancelled} undelivered message(s) cancelled)")


@notify_app.command("dispatch")
@guarded
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
    from feedledger.notify.dispatch import Policy
    from feedledger.notify.operations import run_dispatch

    policy = Policy(
        max_attempts=max_attempts,
        backoff_base_s=backoff,
        timeout_s=timeout,
        concurrency=concurrency,
        batch=batch,
    )
    with context(ctx) as c, _progress(quiet=json_out) as step:
        report = run_dispatch(c, once=once, policy=policy, poll_s=poll, progress=step)
    if json_out:
        emit_json(report)
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
def _progress(quiet: bool) -> Iterator[Progress | None]:
    """Messages attempted so far, on stderr (nothing when stderr is not a terminal)."""
    if quiet or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
    from rich.progress import Progress as Bar

    with Bar(
        TextColumn("dispatch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def step(attempted: int, total: int | None, report: DispatchReport) -> None:
            shown = f"{report.delivered} delivered, {report.failed} to retry, {report.dead} dead"
            bar.update(task, completed=attempted, total=total, description=shown)

        yield step


@notify_app.command("status")
@guarded
def notify_status(ctx: typer.Context, json_out: bool = JSON_OPT) -> None:
    """Per subscriber: pending, failed (to retry), delivered, dead, cancelled, being sent
    now by a running dispatcher (claimed); the oldest pending message's age."""
    from feedledger.notify.operations import status

    with context(ctx) as c:
        data = status(c)
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


@notify_app.command("retry")
@guarded
def notify_retry(
    ctx: typer.Context,
    subscriber: str | None = typer.Option(None, "--subscriber", help="Only this subscriber."),
    json_out: bool = JSON_OPT,
) -> None:
    """Make dead-lettered messages pending again (same message ids)."""
    from feedledger.notify.operations import retry

    with context(ctx) as c:
        n = retry(c, subscriber)
    if json_out:
        emit_json({"requeued": n, "subscriber": subscriber})
    else:
        out.print(f"{n} dead message(s) pending again")


@notify_app.command("correction")
@guarded
def notify_correction(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="The run whose notifications went out wrongly."),
    message: str = typer.Option(..., "--message", help="What subscribers should know."),
    json_out: bool = JSON_OPT,
) -> None:
    """Queue ONE correction naming RUN_ID, instead of retracting each alert."""
    from feedledger.ledger import run_ids
    from feedledger.notify.operations import correction

    with context(ctx) as c:
        run_id = run_ids.resolve(c.store, run_id)  # the whole id or any unique prefix
        data = correction(c, run_id, message)
    if json_out:
        emit_json(data)
    else:
        out.print(f"correction for run {run_id} queued; `feedledger notify dispatch` sends it")
