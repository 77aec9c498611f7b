"""Prometheus metrics of a scheduler process (`--metrics-port`), in a registry of its
own: per source its staleness, missed publications, last successful fetch and last
publisher date, frozen, held runs and undelivered notifications; per attempt a
counter by outcome and a duration histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
