"""`feedledger scheduler` (long-running; the scheduler is a sibling face) and
`feedledger health` (is any source stale? through the public API's `Ledger.health`)."""

from __future__ import annotations

import signal
import sys
import threading

import typer

from feedledger.cli.common import (
    JSON_OPT,
    config_path,
    emit_json,
    err,
    instant,
    ledger,
    out,
    table,
    workspace,
)
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import from_us, now_us


def scheduler(
    ctx: typer.Context,
    workers: int = typer.Option(2, "--workers", min=1, help="Sources run at once here."),
    tick: float = typer.Option(
        30.0, "--tick", min=0.05, help="Seconds between looks at what is due."
    ),
    lease_ttl: int = typer.Option(
        60,
        "--lease-ttl",
        min=2,
        help="Seconds a dead worker's leases last before another takes its sources over "
        "(live leases are renewed every third of it). On one host a dead worker's "
        "leases are taken over at once.",
    ),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", min=1, max=65535, help="Serve Prometheus metrics on this port."
    ),
    metrics_addr: str = typer.Option(
        "127.0.0.1", "--metrics-addr", help="Address the metrics server listens on."
    ),
    dispatch: bool = typer.Option(
        True, "--dispatch/--no-dispatch", help="Deliver notifications after each tick."
    ),
    once: bool = typer.Option(
        False, "--once", help="One tick: run what is due now, wait for it, then exit."
    ),
    max_warm_sources: int = typer.Option(
        8,
        "--max-warm-sources",
        min=0,
        help="Sources whose diff state is kept in memory between runs (least recently "
        "used dropped first; 0: none). `health` shows what is held and its bytes.",
    ),
) -> None:
    """Run every unfrozen source with a fetch location on its cadence, until SIGTERM.

    A publication of date D is due at the source's `publish_at` (its cron time for a
    cron cadence); until it arrives the scheduler retries with backoff (`retry_s`,
    doubling to an hour) for `fetch_window_h`. More than one missed publication is never
    caught up naively: the scheduler fills the archive with what the publisher still
    serves and backfills (one summary, gaps for what is lost) -- or, with `recovery =
    "hold"`, announces it and waits for an operator. Staleness and failures are
    announced to the notification subscribers once per episode, and once when they
    clear. Any number of schedulers (processes or machines sharing a PostgreSQL store)
    share the sources: one run per source at a time, by the lease in the store.

    Logs: one JSON line per event on stderr (`"event": "run"` per attempt, with
    source, run_id, outcome, counts and duration). SIGTERM / SIGINT: no new runs; a
    backfill stops after its current payload; leases are released; exit 0.
    """
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)  # from the start: a stop while starting is clean
    signal.signal(signal.SIGINT, stop)

    from feedledger.scheduler.loop import Options, Scheduler  # lazy: --help loads no scheduler
    from feedledger.scheduler.metrics import Metrics  # lazy: --help loads no scheduler

    ws = workspace(ctx)
    if not any(s.fetch for s in ws.sources.values()):
        err.print(
            "[yellow]warning:[/] no source has a fetch location: nothing will run "
            "(health is still watched); add one with `feedledger source add ... --fetch`",
            markup=True,
        )
    metrics = Metrics() if metrics_port is not None else None
    options = Options(
        workers=workers,
        tick_s=tick,
        lease_ttl_s=lease_ttl,
        dispatch=dispatch,
        max_warm_sources=max_warm_sources,
    )
    sched = Scheduler(config_path(ctx) or ws.config_path, options, metrics=metrics, stop=stopping)
    if metrics is not None and metrics_port is not None:
        try:
            metrics.serve(metrics_port, metrics_addr)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {metrics_addr}:{metrics_port}: {exc.strerror}"
            ) from None
    try:
        sched.run(once=once)
    finally:
        sched.close()


def health(
    ctx: typer.Context,
    sources: list[str] | None = typer.Argument(None, help="Only these sources."),
    at: str | None = typer.Option(
        None, "--at", help="Judge as if it were this instant (ISO 8601; default: now)."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Per source: last successful fetch, last publisher date, expected publications
    missed since, lease, frozen, held runs, undelivered notifications. Per destination:
    its live route's lag (messages and changes behind, age of the oldest).

    Exits 1 when any source is stale (it missed more than its `stale_after` expected
    publications, default 1; frozen sources are never stale) or its publisher date is
    wrong (ahead of the clock, or gone back before the watermark with other content),
    0 otherwise. A fetch that found nothing new observed the source: not missed.

    Resident: each scheduler process running on this host for the workspace, with the
    sources' diff states it keeps in memory (`--max-warm-sources`), their bytes, and
    whether each is current (one that is not is reloaded before its next use), and
    its RSS after its last attempt (what it holds between runs) and at its peak.
    """
    when = instant(at, "UTC", "--at") if at else from_us(now_us())
    with ledger(ctx) as led:
        names = [n for part in sources or [] for n in part.split(",") if n]
        report = led.health(names, at=when)
        lags = [d.to_json() for d in led.destination_lag(names or None, at=when)]
        resident = led.resident()
    stale = [h.source for h in report if h.stale]
    dates = [h for h in report if h.publisher_date_problem]
    if json_out:
        emit_json(
            {
                "ok": not (stale or dates),
                "stale": stale,
                "publisher_date_problems": [h.source for h in dates],
                "sources": [h.to_json() for h in report],
                "destinations": lags,
                "resident": [r.to_json() for r in resident],
            }
        )
    else:
        rows = []
        for h in report:
            j = h.to_json()
            notes = j["notifications"]
            rows.append(
                [
                    h.source,
                    j["status"],
                    str(j["missed_publications"]),
                    j["last_publisher_date"] or "",
                    j["last_successful_fetch"] or "",
                    j["lease"].get("state", ""),
                    str(h.held_runs),
                    f"{notes.get('pending', 0)}/{notes.get('dead', 0)}",
                    (j["schedule"].get("last_error") or "")[:60],
                ]
            )
        table(
            "health",
            [
                "source",
                "status",
                "missed",
                "last publisher date",
                "last successful fetch",
                "lease",
                "held runs",
                "pending/dead msgs",
                "last error",
            ],
            rows,
        )
        if lags:
            table(
                "destinations (live route lag)",
                ["destination", "source", "messages behind", "changes behind", "lag", "paused",
                 "unfinished rebuild"],
                [
                    [d["destination"], d["source"], f"{d['messages_behind']:,}",
                     f"{d['changes_behind']:,}", f"{d['lag_s']:.1f} s", str(d["paused"]),
                     "; ".join(
                         f"{r['manifest']}: resumes at batch {r['batch']:,} of "
                         f"{r['batches']:,} ({r['keys_done']:,} of {r['population']:,} keys)"
                         for r in d.get("unfinished_rebuilds", [])
                     )]
                    for d in lags
                ],
            )  # fmt: skip
        if resident:
            held: list[list[str]] = []
            for r in resident:
                who = f"pid {r.pid} ({len(r.states)}/{r.max_warm_sources})"
                held.extend(
                    [who, w.source, str(w.commit_seq), f"{w.rows:,}", f"{w.bytes / 2**20:,.1f}",
                     "yes" if w.current else "no: reloaded before use"]
                    for w in r.states
                )  # fmt: skip
                if not r.states:
                    held.append([who, "", "", "", "", ""])
            table(
                "resident (diff states kept warm by schedulers on this host)",
                ["process", "source", "commit seq", "rows", "MiB", "current"],
                held,
            )
            for r in resident:  # what each holds in all, between runs
                if r.rss_bytes is not None and r.peak_rss_bytes is not None:
                    out.print(
                        f"pid {r.pid}: RSS {r.rss_bytes / 2**20:,.0f} MiB after its last "
                        f"attempt (peak {r.peak_rss_bytes / 2**20:,.0f} MiB)"
                    )
        if stale:
            err.print(f"stale: {', '.join(stale)}")
        for h in dates:
            err.print(f"{h.source}: {h.publisher_date_problem}", markup=False, highlight=False)
    out.file.flush()
    if stale or dates:
        sys.stdout.flush()
        raise typer.Exit(1)
