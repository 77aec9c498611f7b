"""Observations (DESIGN invariant 12): a poll that succeeded and found nothing new
observed the source. Per source, in `schedule_state`: when it was last observed, the
publisher date the source stated then, and a one-line problem with that date (ahead of
the clock, or gone back before the watermark with other content) while it lasts; and,
per stated publisher date, the latest instant a fetch still found it (`observations`:
the state held over that span, so its days are never gaps).

Revision ID: 0013_observations
Revises: 0012_decoded_changes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_observations"
down_revision = "0012_decoded_changes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedule_state") as batch:
        batch.add_column(sa.Column("observed_at", sa.BigInteger))
        batch.add_column(sa.Column("observed_published_at", sa.BigInteger))
        batch.add_column(sa.Column("date_problem", sa.Text))
    op.create_table(
        "observations",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("published_at", sa.BigInteger, primary_key=True),
        sa.Column("observed_until", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("observations")
    with op.batch_alter_table("schedule_state") as batch:
        batch.drop_column("date_problem")
        batch.drop_column("observed_published_at")
        batch.drop_column("observed_at")
