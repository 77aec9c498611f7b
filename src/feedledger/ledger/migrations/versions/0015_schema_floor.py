"""Rolling upgrades (issue 31, docs/upgrading.md): the store says which releases may
still run against it, and a lease says which release holds it.

`schema_floor` (one row): the oldest schema revision whose feedledger may run against
this store. A release whose own migrations do not include it refuses to open the store
and to take a lease (ledger/engine.py `refuse_newer`). Every migration from this one on
declares its `floor` (module attribute): a compatible (expand) migration keeps the
floor where it was, an incompatible one raises it, and sets the row in `upgrade` (and
puts it back in `downgrade`). `db upgrade` reads the pending migrations' floor first
and refuses while a live lease is held by a release older than it (`engine.upgrade`).

`leases.holder_schema`: "<schema revision> <holder>" of the release that took the
lease, cleared on release; a lease whose value names another holder (or none) was
taken by a release older than this migration, which runs only on its own revision.

Compatible: a new table and a nullable column; releases at 0013 and 0014 keep working
(they never read either).

Revision ID: 0015_schema_floor
Revises: 0014_health_indexes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_schema_floor"
down_revision = "0014_health_indexes"
branch_labels = None
depends_on = None
floor = "0013_observations"


def upgrade() -> None:
    table = op.create_table("schema_floor", sa.Column("floor", sa.String(64), primary_key=True))
    op.bulk_insert(table, [{"floor": floor}])
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("holder_schema", sa.String(300)))


def downgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("holder_schema")
    op.drop_table("schema_floor")
