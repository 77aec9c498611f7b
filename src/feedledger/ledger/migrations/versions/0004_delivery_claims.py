"""Claims on deliveries: a dispatcher claims the messages it is about to send, so two
dispatchers never send one message at the same time.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(200)))
        batch.add_column(sa.Column("claimed_until", sa.BigInteger))
    op.create_index(
        "ix_deliveries_claimed",
        "deliveries",
        ["claimed_by"],
        sqlite_where=sa.text("claimed_by IS NOT NULL"),
        postgresql_where=sa.text("claimed_by IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_claimed", table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("claimed_until")
        batch.drop_column("claimed_by")
