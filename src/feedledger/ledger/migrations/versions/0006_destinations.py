"""Destinations, manifests, sync checkpoints, cursors and the outcome ledger of
guarded destination writes.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text


def upgrade() -> None:
    op.create_table(
        "destinations",
        sa.Column("name", S(64), primary_key=True),
        sa.Column("source", S(64), nullable=False),
        sa.Column("kind", S(16), nullable=False),
        sa.Column("url", T, nullable=False),
        sa.Column("table_name", S(63), nullable=False),
        sa.Column("text_fields", T),
        sa.Column("transform", T),
        sa.Column("generation", S(64), nullable=False),
        sa.Column("created_at", B, nullable=False),
        sa.Column("paused_at", B),
    )
    op.create_table(
        "manifests",
        sa.Column("manifest_id", S(40), primary_key=True),
        sa.Column("name", S(64), nullable=False, unique=True),
        sa.Column("source", S(64), nullable=False),
        sa.Column("created_at", B, nullable=False),
        sa.Column("boundary_published_at", B),
        sa.Column("boundary_payload_id", S(32)),
        sa.Column("boundary_txn_seq", B),
        sa.Column("generation", S(64), nullable=False),
        sa.Column("reconstructible", sa.Boolean, nullable=False),
        sa.Column("population", B, nullable=False),
        sa.Column("keys_from", T),
    )
    op.create_table(
        "manifest_keys",
        sa.Column("manifest_id", S(40), primary_key=True),
        sa.Column("key", T, primary_key=True),
    )
    op.create_table(
        "sync_outcomes",
        sa.Column("destination", S(64), primary_key=True),
        sa.Column("scope", S(40), primary_key=True),  # a manifest id, or "live"
        sa.Column("key", T, primary_key=True),
        sa.Column("verdict", S(16), nullable=False),
        sa.Column("revision", B),
        sa.Column("generation", S(64)),
        sa.Column("content_hash", S(64)),
        sa.Column("reason", T),
        sa.Column("evidence", T),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="1"),
        sa.Column("at", B, nullable=False),
    )
    op.create_table(
        "sync_checkpoints",
        sa.Column("destination", S(64), primary_key=True),
        sa.Column("manifest_id", S(40), primary_key=True),
        sa.Column("attempted_key", T),
        sa.Column("acknowledged_key", T),
        sa.Column("batches", sa.Integer, nullable=False, server_default="0"),
        sa.Column("status", S(16), nullable=False),
        sa.Column("started_at", B, nullable=False),
        sa.Column("updated_at", B, nullable=False),
    )
    op.create_table(
        "sync_cursors",
        sa.Column("destination", S(64), primary_key=True),
        sa.Column("outbox_id", B, nullable=False),
        sa.Column("updated_at", B, nullable=False),
    )


def downgrade() -> None:
    for name in (
        "sync_cursors",
        "sync_checkpoints",
        "sync_outcomes",
        "manifest_keys",
        "manifests",
        "destinations",
    ):
        op.drop_table(name)
