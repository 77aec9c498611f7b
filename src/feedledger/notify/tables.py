"""The notification feature's tables (SQLAlchemy Core): subscribers and their
deliveries (one row per message per subscriber, with its dispatcher claim).

They are defined on the ledger's one `MetaData` (ledger/schema.py), so the store has one
schema, created and upgraded only by the hand-written Alembic migrations (0003, 0004).
The outbox the payload transaction writes stays in ledger/schema.py (Invariant 2); the
`counters` row holding the cancel epoch lives in the ledger's shared `counters` table.
Anything that needs every table of the store (a test dumping them all) imports this
module as well as ledger/schema.py.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from feedledger.ledger.schema import metadata

__all__ = ["deliveries", "subscribers"]

# Who hears about changes: a webhook URL or a JSON-lines file, optionally limited to some
# sources, optionally as digests. Only the NAME of the environment variable holding the
# signing secret is stored.
subscribers = Table(
    "subscribers",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("target", Text, nullable=False),
    Column("secret_env", String(128)),
    Column("sources", Text),
    Column("digest", String(16), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# One message to one subscriber (an outbox row fans out into one message per change, or
# one per run-level notice); `message_id` is its stable idempotency key.
deliveries = Table(
    "deliveries",
    metadata,
    Column(
        "delivery_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("subscriber", String(64), nullable=False),
    Column("outbox_id", BigInteger, nullable=False),
    Column("message_id", String(80), nullable=False),
    Column("source", String(64), nullable=False),
    Column("topic", String(32), nullable=False),
    Column("body", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("last_error", Text),
    Column("last_status", Integer),
    Column("created_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger),
    # the dispatcher sending it now, and until when its claim holds (migration 0004)
    Column("claimed_by", String(200)),
    Column("claimed_until", BigInteger),
    UniqueConstraint("subscriber", "message_id", name="uq_deliveries_message"),
    Index("ix_deliveries_due", "status", "next_attempt_at"),
    Index("ix_deliveries_subscriber", "subscriber", "status"),
    Index("ix_deliveries_outbox", "outbox_id"),  # a run's notices' messages (0009)
    Index(
        "ix_deliveries_claimed",
        "claimed_by",
        sqlite_where=text("claimed_by IS NOT NULL"),
        postgresql_where=text("claimed_by IS NOT NULL"),
    ),
)
