"""Alembic environment: runs on the connection feedledger hands over (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from feedledger.ledger.schema import metadata

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
