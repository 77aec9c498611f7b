"""The write audit: who (a token's label) did what over the HTTP API (`feedledger
serve`), when, to which run or source; an index of deliveries by outbox row (a run's
page shows how its notices' messages stand); each reconcile's report (a destination's
page shows the last one).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "write_audit",
        sa.Column("audit_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("source", sa.String(64)),
        sa.Column("run_id", sa.String(40)),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_write_audit_run", "write_audit", ["run_id"])
    op.create_index("ix_write_audit_source", "write_audit", ["source"])
    op.create_index("ix_deliveries_outbox", "deliveries", ["outbox_id"])
    op.create_table(
        "sync_reconciles",
        sa.Column("reconcile_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("destination", sa.String(64), nullable=False),
        sa.Column("manifest", sa.String(64), nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
    )
    op.create_index(
        "ix_sync_reconciles_destination", "sync_reconciles", ["destination", "reconcile_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_sync_reconciles_destination", "sync_reconciles")
    op.drop_table("sync_reconciles")
    op.drop_index("ix_deliveries_outbox", "deliveries")
    op.drop_index("ix_write_audit_source", "write_audit")
    op.drop_index("ix_write_audit_run", "write_audit")
    op.drop_table("write_audit")
