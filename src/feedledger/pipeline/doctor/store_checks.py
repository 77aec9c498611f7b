"""`doctor`'s checks of the store: the schema's revision, PostgreSQL's settings, and what
`health` knows per source (leases, dead letters, staleness) and per destination (lag,
rebuilds, reconcile). Each check is one function returning its findings."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from feedledger.ledger import engine as eng
from feedledger.ledger.runs.holders import holder_dead
from feedledger.model.timeutil import iso, to_us
from feedledger.pipeline.doctor.findings import ERROR, WARNING, Finding, Options

if TYPE_CHECKING:
    from feedledger.context import Context
    from feedledger.pipeline.health import SourceHealth

_UNITS = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}

# PostgreSQL settings that matter for this load: payloads written in bulk (COPY of a
# payload's versions, one transaction per payload), "latest version per key" read per
# source (a sort or hash over its keys), hundreds of sources' leases, runs and
# deliveries updated all day. (name, the least that is fine, the fix, why.)
# Bytes are PostgreSQL's units (SHOW's text: 4MB, 1GB...).
PG_MINIMUMS: list[tuple[str, int, str, str]] = [
    (
        "work_mem",
        16 << 20,
        "ALTER SYSTEM SET work_mem = '64MB', then reload "
        "PostgreSQL's configuration (pg_reload_conf())",
        "each source's latest-version-per-key read (verify, snapshots, a cold diff "
        "state) sorts its keys: a 100k-parcel source's sort takes 11.7MB, and at 4MB "
        "it spills to disk (an external merge; bench/README.md)",
    ),
    (
        "maintenance_work_mem",
        256 << 20,
        "ALTER SYSTEM SET maintenance_work_mem = '512MB', then reload "
        "PostgreSQL's configuration (pg_reload_conf())",
        "index builds of `db upgrade` and vacuums of `versions` (millions of rows) "
        "sort and track dead rows in this memory; the 64MB default is sized for small "
        "databases (not measured here: PostgreSQL's own guidance)",
    ),
    (
        "max_wal_size",
        2 << 30,
        "ALTER SYSTEM SET max_wal_size = '4GB', then reload "
        "PostgreSQL's configuration (pg_reload_conf())",
        "a first load or a backfill writes ~1.2KB of WAL per version (a 100k-parcel "
        "first load: 119MB, so 300 sources of 20k: ~7GB); under 2GB checkpoints are "
        "forced by WAL volume again and again while it is written",
    ),
    (
        "shared_buffers",
        256 << 20,
        "ALTER SYSTEM SET shared_buffers = '4GB' (a quarter of the server's memory), "
        "then restart PostgreSQL",
        "the `versions` indexes the latest-per-key reads and the leases' scans walk "
        "stay cached; the 128MB default is for a laptop",
    ),
]


def _bytes(text: str) -> int | None:
    """SHOW's memory text in bytes ("4MB" -> 4194304); None if it is not one."""
    m = re.fullmatch(r"\s*(\d+)\s*(B|kB|MB|GB|TB)?\s*", text)
    if m is None:
        return None
    return int(m.group(1)) * _UNITS[m.group(2) or "B"]


def least_mib(name: str) -> int:
    """The least `name` of PG_MINIMUMS that is fine, in MB (as findings say it)."""
    return next(least for n, least, *_ in PG_MINIMUMS if n == name) >> 20


def _number(revision: str | None) -> int:
    m = re.match(r"(\d+)_", revision or "")
    return int(m.group(1)) if m else -1


def _floor_known(engine: Any) -> bool:
    """Whether this release may run on the store (`eng.refuse_newer` lets it)."""
    return eng.floor_known(engine)


def open_engine(url: str) -> Any:
    """An engine (SQLAlchemy's, opaque here: the ledger's functions take it) on the
    store, nothing created; StoreUnavailableError when it cannot be reached: `doctor`
    then cannot check (exit 2)."""
    engine = eng.make_engine(url, create=False)
    try:
        eng.check_reachable(engine, url)
    except BaseException:
        engine.dispose()
        raise
    return engine


def check_schema(engine: Any, url: str) -> list[Finding]:
    """The store's schema revision against the one this feedledger needs (`eng.HEAD`)."""
    current = eng.current_revision(engine)
    if current == eng.HEAD:
        return []
    store = eng.redact(url)
    if current is None:
        return [
            Finding(
                "schema_missing",
                ERROR,
                store,
                "the store has no feedledger schema",
                "nothing can be recorded or read until it is created",
                "feedledger db upgrade",
            )
        ]
    if current not in eng.REVISIONS or _number(current) > _number(eng.HEAD):
        return [
            Finding(
                "schema_ahead",
                ERROR,
                store,
                f"the store is at revision {current}, newer than this feedledger's {eng.HEAD}",
                "a newer release upgraded the store; "
                + (
                    "its floor is a schema this one knows, so this one still runs on it"
                    if _floor_known(engine)
                    else "this one refuses to use it (docs/upgrading.md)"
                ),
                "install the feedledger release that upgraded the store (`feedledger db "
                "current` names its revision)",
            )
        ]
    return [
        Finding(
            "schema_behind",
            ERROR,
            store,
            f"the store is at revision {current}; this feedledger needs {eng.HEAD}",
            "every command refuses the store until its schema is upgraded (the other "
            "checks of the store were skipped)",
            "feedledger db upgrade",
        )
    ]


def check_postgres(engine: Any) -> list[Finding]:
    """PG_MINIMUMS and autovacuum, as the store's sessions see them."""
    shown = eng.settings(engine, [n for n, *_ in PG_MINIMUMS] + ["autovacuum"])
    got: list[Finding] = []
    for name, least, fix, why in PG_MINIMUMS:
        size = _bytes(shown[name])
        if size is not None and size < least:
            what = f"{name} is {shown[name]} (under {least_mib(name)}MB)"
            got.append(Finding("postgres_setting", WARNING, name, what, why, fix))
    if shown["autovacuum"] != "on":
        got.append(
            Finding(
                "postgres_setting",
                WARNING,
                "autovacuum",
                f"autovacuum is {shown['autovacuum']}",
                "leases, runs, deliveries and schedule state are updated all day: without "
                "autovacuum their tables and indexes bloat and the scheduler's lease scans "
                "slow down; `versions` never gets its visibility map set",
                "ALTER SYSTEM SET autovacuum = on, then reload "
                "PostgreSQL's configuration (pg_reload_conf())",
            )
        )
    return got


def _instant(text: Any) -> int | None:
    return to_us(datetime.fromisoformat(text)) if isinstance(text, str) else None


def check_leases(report: list[SourceHealth], opts: Options) -> list[Finding]:
    """A lease held by a process that is gone: its holder (`host:pid:token:start`) is a
    process of this host no longer running (`holders.holder_dead`: gone, a zombie, or its
    pid reused), or -- any host -- its expiry has passed (its holder renews it every third
    of its TTL while it lives, so it stopped). Either is taken over by the source's next
    run, which marks the runs it left `running` abandoned."""
    got = []
    for h in report:
        holder = h.lease.get("holder")
        if h.lease.get("state") != "held" or not holder:
            continue
        expires = _instant(h.lease.get("expires_at"))
        if holder_dead(holder):
            what = f"the lease is held by {holder}, a process of this host that is gone"
        elif expires is not None and expires < opts.now_us:
            what = f"the lease held by {holder} expired at {iso(expires)} without renewal"
        else:
            continue
        got.append(
            Finding(
                "lease_orphaned",
                WARNING,
                h.source,
                what + f" (run {h.lease.get('run_id')})",
                "its run was killed or hung; the scheduler takes the source over at its "
                "next attempt, and until then the source does not advance",
                f"feedledger run {h.source}"
                if h.scheduled
                else f"feedledger ingest {h.source} FILE (takes the lease over)",
            )
        )
    return got


def check_dead_letters(report: list[SourceHealth]) -> list[Finding]:
    """Notifications whose delivery gave up (dead-lettered), per source."""
    return [
        Finding(
            "dead_letters",
            WARNING,
            h.source,
            f"{h.notifications['dead']} notification(s) dead-lettered",
            "their subscribers never got these changes; delivery stopped retrying them",
            "feedledger notify status (which subscriber, why), then feedledger notify retry",
        )
        for h in report
        if h.notifications.get("dead")
    ]


def check_stale(report: list[SourceHealth]) -> list[Finding]:
    """Sources `health` fails: stale by cadence, or a wrong publisher date."""
    got = []
    for h in report:
        if h.stale:
            fix = (
                f"feedledger run {h.source} (archives and backfills what the publisher "
                "still serves, gaps for the rest)"
                if h.scheduled
                else f"feedledger ingest {h.source} FILE for each missed publication, oldest "
                f"first (or feedledger gap add {h.source} --from D --to D --reason TEXT for "
                "what is lost)"
            )
            dates = ", ".join(d.isoformat() for d in h.missed_dates[-3:])
            got.append(
                Finding(
                    "source_stale",
                    WARNING,
                    h.source,
                    f"{h.missed} expected publication(s) missed (cadence {h.cadence}; "
                    f"latest: {dates})",
                    f"its ledger stops at {iso(h.last_publisher_at) or 'nothing'}; more than "
                    f"{h.stale_after} missed makes it stale",
                    fix,
                )
            )
        if h.publisher_date_problem:
            got.append(
                Finding(
                    "publisher_date",
                    WARNING,
                    h.source,
                    h.publisher_date_problem,
                    "the source's publications are refused until its date is right",
                    f"feedledger health {h.source} (the problem and its remedy), then "
                    f"feedledger run {h.source}",
                )
            )
    return got


def check_destinations(ctx: Context, opts: Options) -> list[Finding]:
    """Destinations behind (the oldest undelivered change older than the threshold),
    with an unfinished rebuild, or whose last reconcile found them incomplete."""
    # lazy: the sync modules load only where destinations are asked about
    from feedledger.pipeline.health import destination_lag  # lazy: see above
    from feedledger.sync import state  # lazy: see above

    got = []
    for d in destination_lag(ctx, opts.now_us):
        name = d["destination"]
        if d["messages_behind"] and d["lag_s"] > opts.destination_lag_s:
            got.append(
                Finding(
                    "destination_behind",
                    WARNING,
                    name,
                    f"{d['changes_behind']} change(s) of {d['source']} not synced, the oldest "
                    f"from {d['oldest_pending_at']} ({d['lag_s'] / 3600:.1f} h)"
                    + (" -- its live route is paused" if d["paused"] else ""),
                    "readers of the destination see an older state than the ledger",
                    f"feedledger sync {name} --live --once",
                )
            )
        for r in d["unfinished_rebuilds"]:
            got.append(
                Finding(
                    "destination_rebuild_unfinished",
                    WARNING,
                    name,
                    f"the rebuild of manifest {r['manifest']} stopped at batch {r['batch']} "
                    f"of {r['batches']}",
                    "the destination holds part of the population",
                    f"feedledger sync {name} --manifest {r['manifest']} (resumes there)",
                )
            )
        last = state.last_reconcile(ctx.store, name)
        if last is not None and not last[1].get("complete"):
            manifest = last[1].get("manifest", "MANIFEST")
            got.append(
                Finding(
                    "destination_unreconciled",
                    WARNING,
                    name,
                    f"its last reconcile ({iso(last[0])}, manifest {manifest}) found it incomplete",
                    "records are missing, extra, stale or unresolved in the destination",
                    f"feedledger sync {name} --manifest {manifest}, then feedledger "
                    f"reconcile {name} --manifest {manifest}",
                )
            )
    return got
