"""Indexes for what `health` reads of every source each scheduler tick (issue 31):
runs held for review (`runs (status, source)`), the last fetch per source
(`payloads (source, fetched_at)`: max(fetched_at) one backward probe per source) and
the standing gaps ending after the sources' watermarks (`gaps (end_at)`). Without them
each read was a sequential scan of its table (tests/scheduler/test_fleet_plans.py).

Compatible: indexes only, so a scheduler of the previous release keeps working on the
store while and after this runs (docs/upgrading.md). On PostgreSQL each CREATE INDEX
holds its table's SHARE lock (writes wait, reads go on) for the time it takes: these
tables have a row per payload or run, seconds at a fleet's size.

Revision ID: 0014_health_indexes
Revises: 0013_observations
"""

from __future__ import annotations

from alembic import op

revision = "0014_health_indexes"
down_revision = "0013_observations"
branch_labels = None
depends_on = None

INDEXES = (
    ("ix_runs_status_source", "runs", ["status", "source"]),
    ("ix_payloads_source_fetched", "payloads", ["source", "fetched_at"]),
    ("ix_gaps_end", "gaps", ["end_at"]),
)


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
