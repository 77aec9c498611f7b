"""Alembic environment: runs on the connection feedledger hands over (no alembic.ini).

`target_metadata` is the store's whole schema: the ledger's tables (ledger/schema.py)
and those the notification, sync and Delta Lake export features declare on the same
MetaData in their own folders, imported here so that autogenerate and `alembic check`
compare the store with every table (without them, autogenerate would propose dropping the features'
tables). This is the one place the ledger imports a feature's table declarations
(an `ignore_imports` of the layers contract in pyproject.toml); the migrations
themselves stay hand-written."""

from __future__ import annotations

from alembic import context

from feedledger.lake import positions as _lake_positions  # noqa: F401  (declares its table)
from feedledger.ledger.schema import metadata
from feedledger.notify import tables as _notify_tables  # noqa: F401  (declares its tables)
from feedledger.sync import tables as _sync_tables  # noqa: F401  (declares its tables)

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
