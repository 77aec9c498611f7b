"""Prometheus metrics of a scheduler process (`--metrics-port`), in a registry of its
own: per source its staleness, missed publications, last successful fetch and last
publisher date, frozen, held runs and undelivered notifications; per attempt a
counter by outcome and a duration histogram; per destination its live route's lag
(seconds, messages, changes behind) and whether it is paused; of the process itself the
end of its last tick and the attempts in flight. deploy/prometheus/feedledger-rules.yml
alerts on them (tests/deploy/test_prometheus_rules.py checks its names against these)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedledger.pipeline.health import SourceHealth
    from feedledger.pipeline.scheduling import Attempt


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import (  # lazy: only with --metrics-port
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self.registry = CollectorRegistry()
        r = self.registry
        self.stale = Gauge(
            "feedledger_source_stale", "1 if the source is stale", ["source"], registry=r
        )
        self.missed = Gauge(
            "feedledger_source_missed_publications",
            "Expected publications due and not in the ledger",
            ["source"],
            registry=r,
        )
        self.frozen = Gauge("feedledger_source_frozen", "1 if frozen", ["source"], registry=r)
        self.last_success = Gauge(
            "feedledger_source_last_success_timestamp_seconds",
            "Last successful fetch (Unix time)",
            ["source"],
            registry=r,
        )
        self.last_publisher = Gauge(
            "feedledger_source_last_publisher_timestamp_seconds",
            "Publisher date of the last applied payload (Unix time)",
            ["source"],
            registry=r,
        )
        self.held = Gauge(
            "feedledger_source_held_runs", "Runs held for review", ["source"], registry=r
        )
        self.notifications = Gauge(
            "feedledger_source_notifications",
            "Undelivered notification messages",
            ["source", "status"],
            registry=r,
        )
        self.runs = Counter(
            "feedledger_runs",
            "Scheduled attempts by action and outcome",
            ["source", "action", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "feedledger_run_duration_seconds",
            "Duration of scheduled attempts",
            ["source"],
            registry=r,
        )
        where = ["destination", "source"]
        self.dest_lag = Gauge(
            "feedledger_destination_lag_seconds",
            "Age of the oldest change the destination's live route has not synced (0: none)",
            where,
            registry=r,
        )
        self.dest_messages = Gauge(
            "feedledger_destination_messages_behind",
            "Outbox messages after the destination's live route cursor",
            where,
            registry=r,
        )
        self.dest_changes = Gauge(
            "feedledger_destination_changes_behind",
            "Changes after the destination's live route cursor",
            where,
            registry=r,
        )
        self.dest_paused = Gauge(
            "feedledger_destination_paused",
            "1 if the destination's live route is paused (a maintenance rebuild)",
            where,
            registry=r,
        )
        self.last_tick = Gauge(
            "feedledger_scheduler_last_tick_timestamp_seconds",
            "When this scheduler last finished looking at what is due (Unix time)",
            registry=r,
        )
        self.inflight = Gauge(
            "feedledger_scheduler_attempts_in_flight",
            "Sources this scheduler is attempting now",
            registry=r,
        )

    def serve(self, port: int, addr: str) -> None:
        from prometheus_client import start_http_server  # lazy: only with --metrics-port

        start_http_server(port, addr=addr, registry=self.registry)

    def observe(self, attempt: Attempt) -> None:
        self.runs.labels(attempt.source, attempt.action, attempt.outcome).inc()
        self.duration.labels(attempt.source).observe(attempt.seconds)

    def update(self, health: SourceHealth) -> None:
        s = health.source
        self.stale.labels(s).set(int(health.stale))
        self.missed.labels(s).set(health.missed)
        self.frozen.labels(s).set(int(health.frozen))
        if health.last_success_at is not None:
            self.last_success.labels(s).set(health.last_success_at / 1e6)
        if health.last_publisher_at is not None:
            self.last_publisher.labels(s).set(health.last_publisher_at / 1e6)
        self.held.labels(s).set(health.held_runs)
        for status, n in health.notifications.items():
            self.notifications.labels(s, status).set(n)

    def destinations(self, lags: list[dict[str, Any]]) -> None:
        """Each destination's live route lag (`pipeline.health.destination_lag`'s rows)."""
        for d in lags:
            labels = (d["destination"], d["source"])
            self.dest_lag.labels(*labels).set(d["lag_s"])
            self.dest_messages.labels(*labels).set(d["messages_behind"])
            self.dest_changes.labels(*labels).set(d["changes_behind"])
            self.dest_paused.labels(*labels).set(int(d["paused"]))

    def ticked(self, now_us: int, inflight: int) -> None:
        self.last_tick.set(now_us / 1e6)
        self.inflight.set(inflight)
