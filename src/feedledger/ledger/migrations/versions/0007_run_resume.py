"""Resumable backfills: a run keeps the window it was asked for and the record of its
interruptions, so an interrupted backfill continues under the run id it started with.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("window_start", sa.BigInteger))
        batch.add_column(sa.Column("window_end", sa.BigInteger))
        batch.add_column(sa.Column("resumptions", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("resumptions")
        batch.drop_column("window_end")
        batch.drop_column("window_start")
