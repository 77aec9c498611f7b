"""Gap records ("not observed" stretches of a source's valid time) and source freezes.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text


def upgrade() -> None:
    op.create_table(
        "gaps",
        sa.Column(
            "gap_id", B().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("source", S(64), nullable=False),
        sa.Column("start_at", B, nullable=False),
        sa.Column("end_at", B, nullable=False),
        sa.Column("reason", T, nullable=False),
        sa.Column("run_id", S(40), nullable=False),
        sa.Column("recorded_at", B, nullable=False),
        sa.Column("retracted_at", B),
        sa.Column("retracted_by", S(40)),
    )
    op.create_index("ix_gaps_source_start", "gaps", ["source", "start_at"])
    op.create_index("ix_gaps_run", "gaps", ["run_id"])
    op.create_table(
        "freezes",
        sa.Column("source", S(64), primary_key=True),
        sa.Column("frozen_at", B, nullable=False),
        sa.Column("reason", T),
    )


def downgrade() -> None:
    op.drop_table("freezes")
    op.drop_index("ix_gaps_run", table_name="gaps")
    op.drop_index("ix_gaps_source_start", table_name="gaps")
    op.drop_table("gaps")
