"""What `health` reports of one source from the ledger, read through one connection:
frozen, the lease, runs held for review, the last fetch. `health` itself reads all
sources at once (`ledger/health_rows`); tests/pipeline/test_health.py checks the two agree."""

from __future__ import annotations

from dataclasses import dataclass

from feedledger.ledger import leases, queries, runs
from feedledger.ledger.freezes import Freeze, frozen
from feedledger.ledger.leases import LeaseState
from feedledger.ledger.store import Store


@dataclass(frozen=True, slots=True)
class SourceFacts:
    freeze: Freeze | None
    lease: LeaseState | None
    held_runs: int
    last_fetched_at: int | None


def source_facts(store: Store, source: str) -> SourceFacts:
    with store.engine.connect() as conn:
        return SourceFacts(
            freeze=frozen(conn, source),
            lease=leases.current(conn, source),
            held_runs=runs.held_count(conn, source),
            last_fetched_at=queries.last_fetched_at(conn, source),
        )
