"""Subscribers and per-subscriber deliveries of outbox messages.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text


def upgrade() -> None:
    op.create_table(
        "subscribers",
        sa.Column("name", S(64), primary_key=True),
        sa.Column("kind", S(16), nullable=False),
        sa.Column("target", T, nullable=False),
        sa.Column("secret_env", S(128)),
        sa.Column("sources", T),
        sa.Column("digest", S(16), nullable=False),
        sa.Column("created_at", B, nullable=False),
    )
    op.create_table(
        "deliveries",
        sa.Column(
            "delivery_id",
            B().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("subscriber", S(64), nullable=False),
        sa.Column("outbox_id", B, nullable=False),
        sa.Column("message_id", S(80), nullable=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("topic", S(32), nullable=False),
        sa.Column("body", T, nullable=False),
        sa.Column("status", S(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", B, nullable=False),
        sa.Column("last_error", T),
        sa.Column("last_status", sa.Integer),
        sa.Column("created_at", B, nullable=False),
        sa.Column("delivered_at", B),
        sa.UniqueConstraint("subscriber", "message_id", name="uq_deliveries_message"),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_deliveries_subscriber", "deliveries", ["subscriber", "status"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_subscriber", table_name="deliveries")
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_table("subscribers")
