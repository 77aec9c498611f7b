"""Run `doctor`'s checks in order (`findings.CHECKS`), each recorded as it ran: ok, with
findings, or skipped and why (left out by the caller; PostgreSQL's settings on SQLite;
the store's checks while its schema is not at head: every command refuses it then).

The store is reached first, on an engine of its own (the workspace's `Store` refuses a
schema not at head): a store that cannot be reached is an error (`doctor` cannot check),
not a finding."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from feedledger.model.errors import ConfigError
from feedledger.pipeline.doctor import data_checks, store_checks
from feedledger.pipeline.doctor.findings import CHECKS, Check, Finding, Options

if TYPE_CHECKING:
    from feedledger.context import Context
    from feedledger.pipeline.health import SourceHealth

HEALTH_CHECKS = ("leases", "dead_letters", "stale_sources")


def examine(ctx: Context, opts: Options) -> list[Check]:
    """Every check of `CHECKS` on the workspace of `ctx`, in order."""
    unknown = sorted(opts.skip - set(CHECKS))
    if unknown:
        raise ConfigError(
            f"no check named {', '.join(unknown)}", hint=f"the checks: {', '.join(CHECKS)}"
        )
    checks = {name: Check(name) for name in CHECKS}
    for name in opts.skip:
        checks[name].status, checks[name].note = "skipped", "left out (--skip)"

    def run(name: str, work: Callable[[], list[Finding] | tuple[list[Finding], str]]) -> None:
        check = checks[name]
        if check.status == "skipped":
            return
        got = work()
        found, note = got if isinstance(got, tuple) else (got, check.note)
        check.findings, check.note = found, note
        check.status = "findings" if found else "ok"

    ws = ctx.workspace
    engine = store_checks.open_engine(ws.store_url)
    try:
        run("schema", lambda: store_checks.check_schema(engine, ws.store_url))
        if engine.dialect.name != "postgresql":
            _skip(checks["postgres_settings"], "the store is SQLite")
        run("postgres_settings", lambda: store_checks.check_postgres(engine))
    finally:
        engine.dispose()
    run("disk", lambda: data_checks.check_disk(ctx, opts))
    sources = sorted(ws.sources)
    run("archive", lambda: data_checks.check_archive(ctx, sources, opts))
    if checks["schema"].findings:
        for name in ("state_cache", "destinations", *HEALTH_CHECKS):
            _skip(checks[name], "the store's schema is not at head")
        return list(checks.values())
    run("state_cache", lambda: _state_caches(ctx, sources, opts))
    if any(checks[n].status != "skipped" for n in HEALTH_CHECKS):
        # lazy: health's modules load only when one of its checks runs
        from feedledger.pipeline.health import health  # lazy: see above

        report: list[SourceHealth] = health(ctx, opts.now_us, sources) if sources else []
        run("leases", lambda: store_checks.check_leases(report, opts))
        run("dead_letters", lambda: store_checks.check_dead_letters(report))
        run("stale_sources", lambda: store_checks.check_stale(report))
    run("destinations", lambda: store_checks.check_destinations(ctx, opts))
    return list(checks.values())


def _skip(check: Check, why: str) -> None:
    if check.status != "skipped":
        check.status, check.note = "skipped", why


def _state_caches(ctx: Context, sources: list[str], opts: Options) -> tuple[list[Finding], str]:
    found: list[Finding] = []
    sampled = 0
    for source in sources:
        got, how = data_checks.check_state_cache(ctx, source, opts)
        found += got
        sampled += how != "whole"
    whole = len(sources) - sampled
    return found, f"{whole} source(s) whole, {sampled} sampled"
