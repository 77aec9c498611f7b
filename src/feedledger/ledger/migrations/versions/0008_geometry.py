"""GIS sources: each version keeps its geometry as stated (GeoJSON text) and the hash
of its canonical form; a payload records its layer's CRS and its field order.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("versions") as batch:
        batch.add_column(sa.Column("geometry", sa.Text))
        batch.add_column(sa.Column("geometry_hash", sa.BigInteger))
    with op.batch_alter_table("outcomes") as batch:
        batch.add_column(sa.Column("geometry", sa.Text))
    with op.batch_alter_table("payloads") as batch:
        batch.add_column(sa.Column("crs", sa.Text))
        batch.add_column(sa.Column("fields", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("payloads") as batch:
        batch.drop_column("fields")
        batch.drop_column("crs")
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_column("geometry")
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("geometry_hash")
        batch.drop_column("geometry")
