"""The Delta Lake export's positions (issue 32, `feedledger export delta`): per Delta
table and source, the transaction instant the table reflects, the Delta version that
got it there, and whether the scheduler follows the source's runs with an export
(`feedledger/lake/positions.py`).

Compatible: a new table; releases at 0013 to 0015 keep working (they never read it).

Revision ID: 0016_delta_exports
Revises: 0015_schema_floor
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_delta_exports"
down_revision = "0015_schema_floor"
branch_labels = None
depends_on = None
floor = "0013_observations"


def upgrade() -> None:
    op.create_table(
        "delta_exports",
        sa.Column("target", sa.Text(), primary_key=True),
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("known_at", sa.BigInteger(), nullable=False),
        sa.Column("delta_version", sa.BigInteger(), nullable=False),
        sa.Column("exported_at", sa.BigInteger(), nullable=False),
        sa.Column("follow", sa.Boolean(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("delta_exports")
