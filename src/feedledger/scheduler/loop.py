"""`feedledger scheduler`: run every unfrozen source with a fetch location when its
cadence says a publication is due; recover missed ones by backfill; watch staleness.

Each tick (every `tick_s` of the clock): reload feedledger.toml, hand every due source
to a pool of `workers` threads (one attempt per source at a time in this process; the
per-source lease in the store keeps other processes and machines off it), and for
every source evaluate health, open or close alert episodes and update the metrics. A
heartbeat thread keeps this process's leases alive, so a short lease time-to-live
hands a dead worker's sources to another one soon. SIGTERM / SIGINT: no new attempts;
a backfill stops after its current payload's transaction; leases are released; exit.
A store whose schema was upgraded past this release (its floor unknown here: a lease
refused with SchemaTooNewError) stops the loop the same way, and `run` raises it.

Resident: the process keeps the store open, its modules imported and the diff states
of up to `max_warm_sources` sources in memory between attempts (least recently used
dropped first; each checked against the store's watermark before use:
ledger/statecache.py), and says what it holds in a file `health` reads (pipeline/resident.py).
Between runs it holds no more than that: glibc's arenas are capped at its start and
their free pages given back after each attempt (pipeline/intake/allocators.py), and its RSS is
in the same file. An attempt returns once its payload is applied: the raw object's compression
(archive/settle.py) is queued on a thread of the process's own (`Context.after_apply`),
drained when the loop stops.

After an attempt that applied payloads, the Delta tables that follow the source
(`feedledger export delta --follow`) are brought up to date on a queue of their own
(`scheduler/follow.py`): a slow export never delays the next source's attempt.

The clock is a parameter: tests drive ticks with a fake one, no sleeping.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.engine import refuse_newer
from feedledger.ledger.runs import holders, leases
from feedledger.ledger.statecache import DEFAULT_MAX_SOURCES
from feedledger.ledger.views.health import HealthRows
from feedledger.model.errors import LeaseHeldError, SchemaTooNewError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso, now_us
from feedledger.notify.dispatch import dispatch
from feedledger.notify.subscriptions import listing
from feedledger.pipeline.health import destination_lag, due_in, from_rows, health, read_rows
from feedledger.pipeline.intake import allocators
from feedledger.pipeline.resident import ResidentReport
from feedledger.pipeline.scheduling import (
    Attempt,
    Interrupted,
    alerts,
    alerts_due,
    attempt,
    due_now,
)
from feedledger.scheduler.follow import FollowQueue
from feedledger.scheduler.metrics import Metrics


def _held_elsewhere(rows: HealthRows) -> bool:
    """Whether another process's run or attempt holds the source's lease now (not
    expired, its holder alive): the source is left to it this tick, unlooked at."""
    lease = rows.lease
    if lease is None or lease.holder is None:
        return False
    if lease.expires_at is not None and lease.expires_at < now_us():
        return False
    return not holders.holder_dead(lease.holder)


class Clock(Protocol):
    def now_us(self) -> int: ...

    def sleep(self, seconds: float, stop: threading.Event) -> None: ...


class SystemClock:
    def now_us(self) -> int:
        return now_us()

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        stop.wait(seconds)


@dataclass
class Options:
    workers: int = 2
    tick_s: float = 30.0
    lease_ttl_s: int = 60
    dispatch: bool = True  # deliver notifications after each tick
    seed: int | None = None
    max_warm_sources: int = DEFAULT_MAX_SOURCES  # diff states kept in memory (LRU)


@dataclass
class Scheduler:
    config_path: Path
    options: Options = field(default_factory=Options)
    clock: Clock = field(default_factory=SystemClock)
    log: IO[str] = field(default_factory=lambda: sys.stderr)
    metrics: Metrics | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        allocators.resident_process()  # before the worker threads allocate anything
        self.rng = random.Random(self.options.seed)
        self._inflight: dict[str, Future[Attempt | None]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.options.workers, thread_name_prefix="source")
        # work an ingest finishes after its payload is applied (the raw object's
        # compression): one thread, in order, so an attempt returns once its payload is
        # applied; `settled` waits for it, stopping drains it
        self._after = ThreadPoolExecutor(1, thread_name_prefix="after-apply")
        self._after_queued: list[Future[object]] = []
        self._follow = FollowQueue(self.emit)  # the Delta exports after a run, queued
        workspace = Workspace.load(self.config_path)
        self._config_text: bytes | None = None  # that of the workspace last parsed
        self.ctx = Context(
            workspace, warm_sources=self.options.max_warm_sources, after_apply=self._queue_after
        )
        self.store = self.ctx.store  # opened once, shared by the workers (thread-safe)
        self.cache = self.ctx.cache  # the diff states kept warm, shared by every tick
        self._report: ResidentReport | None = None
        # the store's schema was upgraded past this release (`db upgrade` of a newer one):
        # no more attempts; `run` stops and raises it (docs/upgrading.md)
        self.refused: SchemaTooNewError | None = None
        leases.set_ttl(self.options.lease_ttl_s)

    # -- logging ----------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({"ts": iso(now_us()), **event}, ensure_ascii=False, default=str)
        with self._lock:
            self.log.write(line + "\n")
            self.log.flush()

    # -- one tick ---------------------------------------------------------------------
    def _workspace(self) -> Workspace:
        """feedledger.toml as it stands: parsed again only when its text changed since
        the last good parse (a fleet's file of 300 sources costs ~8 ms a parse, and a
        tick comes every `tick_s`); a broken edit keeps the last good one."""
        try:
            text = Workspace.locate(self.config_path).read_bytes()
        except OSError:
            text = None  # Workspace.load names the problem
        if text is not None and text == self._config_text:
            return self.ctx.workspace
        try:
            workspace = Workspace.load(self.config_path)
        except Exception as exc:  # a broken edit: keep the last good configuration
            self.emit({"event": "config_error", "error": str(exc)})
            return self.ctx.workspace
        self.ctx.workspace, self._config_text = workspace, text
        return workspace

    def _context(self) -> Context:
        """This tick's workspace (feedledger.toml may have changed), the same store."""
        workspace = self._workspace()
        ctx = Context(workspace, after_apply=self._queue_after)
        ctx._store = self.store
        ctx._cache = self.cache
        ctx._archive = self.ctx._archive  # opened on first use (_keep_archive), then shared
        return ctx

    def _keep_archive(self, ctx: Context) -> None:
        """Share the archive a tick's context opened with every later tick."""
        if self.ctx._archive is None and ctx._archive is not None:
            self.ctx._archive = ctx._archive

    def _queue_after(self, call: Callable[[], object]) -> None:
        try:
            future = self._after.submit(call)
        except RuntimeError:  # stopped (its queue drained): done here and now
            call()
            return
        with self._lock:
            self._after_queued = [f for f in self._after_queued if not f.done()] + [future]

    def settled(self) -> None:
        """Wait for the work queued after the payloads applied so far (their objects'
        compression, the Delta exports that follow their sources) to end."""
        with self._lock:
            queued = list(self._after_queued)
        for future in queued:
            future.exception()  # (the archive's settle never raises; nothing is lost)
        self._follow.settled()  # and the Delta exports queued after them

    def _publish_warm(self) -> None:
        if self._report is not None and self.cache.warm is not None:
            self._report.publish(self.cache.warm)

    def _progress(self) -> Callable[[int, int, object], None]:
        def step(_done: int, _total: int, _ref: object) -> None:
            if self.stop.is_set():
                raise Interrupted

        return step

    def _run_one(self, ctx: Context, name: str, now: int) -> Attempt | None:
        src = ctx.workspace.source(name)
        with ExitStack() as claim:
            try:
                # the source's lease claimed first: a worker of another scheduler on it
                # now makes this attempt `busy` before it fetched, read or diffed anything
                claim.enter_context(leases.claimed(self.store, name))
            except LeaseHeldError as exc:
                return self._busy(src, now, exc)
            except SchemaTooNewError as exc:
                self._refuse(exc)
                return None
            except Exception:  # the store is down: the attempt says so
                pass
            try:
                if not due_now(ctx, src, now):
                    # looked at again under the claim: another scheduler applied it (or
                    # tried it and set its next try) since this tick queued it -- no
                    # fetch, no read, no attempt recorded over that scheduler's
                    return None
            except Exception:  # the store is down: the attempt says so
                pass
            try:
                result = attempt(ctx, src, now, self.rng, progress=self._progress())
            except SchemaTooNewError as exc:
                self._refuse(exc)
                return None
            except Exception as exc:  # never silent: a worker's exception ends in its future
                self.emit(
                    {"event": "error", "source": name, "error": f"{type(exc).__name__}: {exc}"}
                )
                return None
            finally:
                self._keep_archive(ctx)
                # between runs: what the attempt freed goes back to the system
                allocators.give_back()
                self._publish_warm()
        self.emit(result.to_json())
        if result.payloads:
            self._follow.queue(ctx, name)  # the Delta tables following it, queued
        if self.metrics is not None:
            self.metrics.observe(result)
        if result.outcome != "interrupted":  # stopping: the next start judges it
            self._watch(ctx, [name], now)  # its alerts once the attempt is over
        return result

    def _busy(self, src: SourceConfig, now: int, exc: LeaseHeldError) -> Attempt:
        """Another process holds the source's lease (its attempt, or an operator's
        command): this attempt ends here, nothing fetched and nothing recorded."""
        result = Attempt(src.name, "live", "busy", now, error=exc.problem)
        self.emit(result.to_json())
        if self.metrics is not None:
            self.metrics.observe(result)
        return result

    def _refuse(self, exc: SchemaTooNewError) -> None:
        self.refused = exc
        self.stop.set()
        self.emit({"event": "error", "error": str(exc), "stopping": True})

    def _schema_allows(self) -> bool:
        """Whether this release may still run on the store (each tick, before anything
        is written: `engine.refuse_newer`; a lease checks again)."""
        try:
            with self.store.engine.connect() as conn:
                refuse_newer(conn)
        except SchemaTooNewError as exc:
            self._refuse(exc)
            return False
        except Exception:  # the store is down: the tick's reads say so
            pass
        return True

    def tick(self, *, wait: bool = False) -> list[Future[Attempt | None]]:
        """Start an attempt for every due source not already in flight here; with
        `wait`, wait for them (and for their alerts) before returning."""
        if not self._schema_allows():
            return []
        ctx = self._context()
        now = self.clock.now_us()
        started: list[Future[Attempt | None]] = []
        # one read of the ledger for every source (a fixed number of statements): which
        # are due, which another process is working on, and the idle ones' health
        try:
            # (the held runs, last fetches and notification counts only for the metrics)
            rows = read_rows(ctx, sorted(ctx.workspace.sources), facts=self.metrics is not None)
        except Exception as exc:  # the store is down: the next tick looks again
            self.emit({"event": "error", "error": f"tick: {type(exc).__name__}: {exc}"})
            rows = {}
        elsewhere = {n for n, r in rows.items() if _held_elsewhere(r)}
        for name, src in self._in_turn(ctx):
            if self.stop.is_set():
                break
            with self._lock:
                busy = name in self._inflight and not self._inflight[name].done()
            if busy or name in elsewhere or name not in rows:
                continue
            if not due_in(src, rows[name], now):
                continue
            future = self._pool.submit(self._run_one, ctx, name, now)
            with self._lock:
                self._inflight[name] = future
            started.append(future)
        if wait:
            for f in started:
                f.result()
        attempted = {n for n, f in self._inflight.items() if f in started}
        with self._lock:
            # each attempt watches its own source, as does the process working on it
            watched = self._running() | attempted | elsewhere
            idle = [n for n in ctx.workspace.sources if n not in watched and n in rows]
        if not self.stop.is_set():
            self._watch(ctx, idle, now, rows)
        if self.options.dispatch:
            self._dispatch()
        self._keep_archive(ctx)
        if self.metrics is not None:
            self._measure(ctx, now)
        return started

    def _in_turn(self, ctx: Context) -> list[tuple[str, SourceConfig]]:
        """The sources in the order this process looks at them this tick: by name from a
        random place. Schedulers started together would otherwise go down the same list
        in step, each fetching, reading and diffing the same source at the same moment
        for all but one to lose its lease at the end (`busy`): a fleet's day done once
        per process."""
        names = sorted(ctx.workspace.sources.items())
        start = self.rng.randrange(len(names)) if names else 0
        return names[start:] + names[:start]

    def _running(self) -> set[str]:
        return {n for n, f in self._inflight.items() if not f.done()}

    def _watch(
        self,
        ctx: Context,
        names: list[str],
        now: int,
        rows: dict[str, HealthRows] | None = None,
    ) -> None:
        """Health of these sources (none with an attempt in flight: a source being
        recovered is not announced stale): alert episodes and metrics. `rows`: their
        health rows as the tick read them (default: read here)."""
        names = sorted(names)
        try:
            if not names:
                report = []
            elif rows is not None:
                full = self.metrics is not None
                report = from_rows(ctx, rows, names, now, notifications=full)
            else:
                report = health(ctx, now, names)
        except Exception as exc:
            self.emit({"event": "error", "error": f"health: {exc}"})
            return
        for h in report:
            if self.metrics is not None:
                self.metrics.update(h)
            try:
                state = rows[h.source].schedule if rows is not None else None
                if state is not None and not alerts_due(h, state):
                    continue  # every episode as it should be: no transaction
                if rows is not None and self.metrics is None:
                    # an episode opens or closes: its notice says what health says in full
                    (h,) = health(ctx, now, [h.source])
                    state = None
                for topic in alerts(ctx, h, now, state):
                    self.emit({"event": "alert", "source": h.source, "topic": topic})
            except Exception as exc:
                self.emit({"event": "error", "source": h.source, "error": f"alert: {exc}"})

    def _measure(self, ctx: Context, now: int) -> None:
        """The destinations' lag and this process's heartbeat, for the metrics: the
        tick's last step, so a scheduler whose ticks stop is seen to (the heartbeat's
        age), as is one whose process is gone (its scrape fails)."""
        assert self.metrics is not None
        try:
            self.metrics.destinations(destination_lag(ctx, now))
        except Exception as exc:
            self.emit({"event": "error", "error": f"destination lag: {exc}"})
        with self._lock:
            running = len(self._running())
        self.metrics.ticked(now, running)

    def _dispatch(self) -> None:
        try:
            if not listing(self.store):
                return
            report = dispatch(self.store, once=True)
        except Exception as exc:
            self.emit({"event": "error", "error": f"notify: {exc}"})
            return
        if report.attempted or report.messages_created:
            self.emit({"event": "notify", **report.to_json()})

    # -- the loop ---------------------------------------------------------------------
    def run(self, *, once: bool = False) -> None:
        self.emit(
            {
                "event": "start",
                "workers": self.options.workers,
                "tick_s": self.options.tick_s,
                "lease_ttl_s": self.options.lease_ttl_s,
                "holder_pid": __import__("os").getpid(),
                "max_warm_sources": self.options.max_warm_sources,
            }
        )
        try:
            self._report = ResidentReport.open(self.ctx)
            self._publish_warm()
        except Exception as exc:  # the store is down: the loop says so each tick
            self.emit({"event": "error", "error": f"resident report: {exc}"})
        with leases.Heartbeat(self.store):
            try:
                while not self.stop.is_set():
                    try:
                        self.tick(wait=once)
                    except Exception as exc:  # the store or archive is down: next tick
                        self.emit({"event": "error", "error": f"{type(exc).__name__}: {exc}"})
                    if once:
                        break
                    self.clock.sleep(self.options.tick_s, self.stop)
            finally:
                self._pool.shutdown(wait=True)  # current payloads finish, leases released
                self._after.shutdown(wait=True)  # their objects compressed
                self._follow.shutdown()  # the Delta exports queued after them
                if self._report is not None:
                    self._report.remove()
        self.emit({"event": "stop"})
        if self.refused is not None:
            raise self.refused

    def close(self) -> None:
        self._after.shutdown(wait=True)
        self._follow.shutdown()
        self.ctx.close()
