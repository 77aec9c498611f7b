"""Scheduler: lease heartbeats, and per-source schedule state (attempts, backoff,
last successful fetch, alert episodes).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

B = sa.BigInteger


def upgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("heartbeat_at", B))
    op.create_table(
        "schedule_state",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("first_attempt_at", B),
        sa.Column("last_attempt_at", B),
        sa.Column("last_success_at", B),
        sa.Column("last_outcome", sa.String(32)),
        sa.Column("last_error", sa.Text),
        sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", B),
        sa.Column("stale_alerted_at", B),
        sa.Column("failure_alerted_at", B),
        sa.Column("hold_alerted_at", B),
    )


def downgrade() -> None:
    op.drop_table("schedule_state")
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("heartbeat_at")
