"""The destinations feature's tables (SQLAlchemy Core): the destination registry and the
live route's cursor over the outbox, manifests and their keys, the outcome ledger of
guarded writes and the rebuild checkpoints.

They are defined on the ledger's one `MetaData` (ledger/schema.py), so the store has one
schema, created and upgraded only by the hand-written Alembic migrations (0006 on). The
ledger never imports this module; anything that needs every table of the store (a test
dumping them all) imports it as well as ledger/schema.py.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from feedledger.ledger.schema import metadata

__all__ = [
    "destinations",
    "manifest_keys",
    "manifests",
    "sync_checkpoints",
    "sync_cursors",
    "sync_outcomes",
    "sync_reconciles",
]

# Destinations (migration 0006): downstream projections of a source's current state.
destinations = Table(
    "destinations",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("source", String(64), nullable=False),
    Column("kind", String(16), nullable=False),  # postgres | sqlite | gpkg
    Column("url", Text, nullable=False),
    Column("table_name", String(63), nullable=False),
    Column("text_fields", Text),  # comma-separated
    Column("transform", Text),  # module:function
    Column("generation", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("paused_at", BigInteger),  # --maintenance: the live route waits
)

manifests = Table(
    "manifests",
    metadata,
    Column("manifest_id", String(40), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("source", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),  # also the boundary's transaction time
    Column("boundary_published_at", BigInteger),
    Column("boundary_payload_id", String(32)),
    Column("boundary_txn_seq", BigInteger),
    Column("generation", String(64), nullable=False),
    Column("reconstructible", Boolean, nullable=False),
    Column("population", BigInteger, nullable=False),
    Column("keys_from", Text),
)

manifest_keys = Table(
    "manifest_keys",
    metadata,
    Column("manifest_id", String(40), primary_key=True),
    Column("key", Text, primary_key=True),
)

# The outcome ledger of guarded destination writes: the latest verdict per key and
# scope (a manifest id, or "live"), so retries are never counted twice.
sync_outcomes = Table(
    "sync_outcomes",
    metadata,
    Column("destination", String(64), primary_key=True),
    Column("scope", String(40), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("verdict", String(16), nullable=False),
    Column("revision", BigInteger),
    Column("generation", String(64)),
    Column("content_hash", String(64)),
    Column("reason", Text),
    Column("evidence", Text),
    Column("attempts", Integer, nullable=False, server_default="1"),
    Column("at", BigInteger, nullable=False),
)

sync_checkpoints = Table(
    "sync_checkpoints",
    metadata,
    Column("destination", String(64), primary_key=True),
    Column("manifest_id", String(40), primary_key=True),
    Column("attempted_key", Text),  # last key of the batch sent, maybe not acknowledged
    Column("acknowledged_key", Text),  # last key of the last batch the destination committed
    Column("batches", Integer, nullable=False, server_default="0"),
    Column("status", String(16), nullable=False),  # running | finished
    Column("started_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

sync_cursors = Table(
    "sync_cursors",
    metadata,
    Column("destination", String(64), primary_key=True),
    Column("outbox_id", BigInteger, nullable=False),  # the live route is done up to here
    Column("updated_at", BigInteger, nullable=False),
)

# Each reconcile's report (its JSON, as `reconcile --json`), so the last one can be shown
# (the HTTP API's destination page; migration 0009).
sync_reconciles = Table(
    "sync_reconciles",
    metadata,
    Column("reconcile_id", Integer, primary_key=True, autoincrement=True),
    Column("destination", String(64), nullable=False),
    Column("manifest", String(64), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("complete", Boolean, nullable=False),
    Column("report", Text, nullable=False),
    Index("ix_sync_reconciles_destination", "destination", "reconcile_id"),
)
