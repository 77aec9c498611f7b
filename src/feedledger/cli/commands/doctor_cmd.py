"""`feedledger doctor`: the workspace checked as a whole, one line per finding (what, why,
the fix), through the public API's `Ledger.doctor`. Exit 0 healthy, 1 findings, 2 the
workspace cannot be checked (its feedledger.toml, store or archive cannot be opened)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from feedledger.cli.common import JSON_OPT, emit_json, err, instant, ledger, out
from feedledger.model.errors import FeedledgerError

if TYPE_CHECKING:
    from feedledger.api.workspace.doctor import DoctorReport

CANNOT_CHECK = 2


def doctor(
    ctx: typer.Context,
    full: bool = typer.Option(
        False,
        "--full",
        help="Check every source's state cache whole and read back every archived payload "
        "(default: sampled above 100k keys, and --sample payloads per source).",
    ),
    sample: int = typer.Option(
        5,
        "--sample",
        min=1,
        help="Archived payloads read back per source without --full (the newest always "
        "among them: its chain reaches back to the last keyframe).",
    ),
    skip: list[str] | None = typer.Option(
        None,
        "--skip",
        help="Leave a check out (repeatable): schema, postgres_settings, disk, state_cache, "
        "archive, leases, dead_letters, destinations, stale_sources.",
    ),
    at: str | None = typer.Option(
        None, "--at", help="Judge staleness and lag as at this instant (ISO 8601; default now)."
    ),
    min_free_gb: float | None = typer.Option(
        None,
        "--min-free-gb",
        min=0.0,
        help="Disk free under the store and archive below this is a finding (default 2 GiB, "
        "or 5 percent of the file system if more).",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Check the workspace and say, for each problem, what it means and the command that
    fixes it.

    Checks, in order (`--skip NAME` leaves one out):

    * schema: the store's schema at this release's head (`db upgrade`)
    * postgres_settings: work_mem, maintenance_work_mem, max_wal_size, shared_buffers,
      autovacuum against this load's needs (PostgreSQL stores)
    * disk: free space under the store's folder (SQLite) and the archive's (a local
      folder; S3 is not checked)
    * state_cache: each source's diff state against history (`verify`): whole under
      100k keys, else 2,000 random keys and the key count
    * archive: archived payloads read back, their delta chains decompressed and their
      sha256 checked (`archive verify`)
    * leases: a lease whose holder is gone: a process of this host no longer running,
      or (any host) expired without renewal
    * dead_letters: notifications whose delivery gave up
    * destinations: behind (the oldest unsynced change over an hour old), a rebuild
      left unfinished, or the last reconcile incomplete
    * stale_sources: more missed publications than the source's stale_after, or a
      wrong publisher date (`health`)

    It repairs nothing (a state cache file found missing is rebuilt from the store,
    as a run would). Exit 0: healthy; 1: findings (each with a fix);
    2: the workspace cannot be checked (its feedledger.toml, store or archive cannot be
    opened: one line on stderr). `--json`: {ok, at, full, findings: [{code, severity,
    subject, what, why, fix}], checks: [{check, status, note, findings}]}.
    """
    when = instant(at, "UTC", "--at") if at else None
    try:
        with ledger(ctx) as led:
            report = led.doctor(
                full=full,
                sample=sample,
                skip=[n for part in skip or [] for n in part.split(",") if n],
                at=when,
                min_free_bytes=None if min_free_gb is None else int(min_free_gb * (1 << 30)),
            )
    except FeedledgerError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        err.print(f"[bold red]error:[/] cannot check: {escape(str(exc))}{escape(hint)}")
        raise typer.Exit(CANNOT_CHECK) from None
    if json_out:
        emit_json(report.to_json())
    else:
        for f in report.findings:
            colour = "red" if f.severity == "error" else "yellow"
            out.print(
                f"[{colour}]{f.severity}[/] [bold]{escape(f.code)}[/] {escape(f.subject)}: "
                f"{escape(f.what)}\n    why: {escape(f.why)}\n    fix: {escape(f.fix)}"
            )
        for c in report.checks:
            if c.status == "skipped":
                out.print(f"[dim]skipped {c.check}: {escape(c.note)}[/]")
        n = len(report.findings)
        out.print(
            "healthy: every check passed"
            if report.ok
            else f"{n} finding{'s' if n != 1 else ''} ({', '.join(_by_check(report))})"
        )
    if not report.ok:
        raise typer.Exit(1)


def _by_check(report: DoctorReport) -> list[str]:
    return [f"{c.check} {c.findings}" for c in report.checks if c.findings]
