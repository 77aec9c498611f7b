"""Initial ledger schema: payloads, runs, applications, versions, watermarks,
outcomes, outbox, leases, counters.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text


def upgrade() -> None:
    op.create_table(
        "payloads",
        sa.Column("payload_id", S(32), primary_key=True),
        sa.Column("source", S(64), nullable=False),
        sa.Column("sha256", S(64), nullable=False),
        sa.Column("published_at", B, nullable=False),
        sa.Column("fetched_at", B, nullable=False),
        sa.Column("size", B, nullable=False),
        sa.Column("original_name", T),
        sa.Column("content_type", S(200)),
        sa.Column("indexed_at", B, nullable=False),
        sa.UniqueConstraint("source", "published_at", name="uq_payloads_source_published"),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", S(40), primary_key=True),
        sa.Column("source", S(64), nullable=False),
        sa.Column("kind", S(16), nullable=False),
        sa.Column("status", S(16), nullable=False),
        sa.Column("started_at", B, nullable=False),
        sa.Column("finished_at", B),
        sa.Column("holder", S(200), nullable=False),
        sa.Column("parent_run_id", S(40)),
        sa.Column("payloads", sa.Integer, nullable=False, server_default="0"),
        sa.Column("changes", B, nullable=False, server_default="0"),
        sa.Column("error", T),
    )
    op.create_index("ix_runs_source_started", "runs", ["source", "started_at"])
    op.create_table(
        "applications",
        sa.Column("payload_id", S(32), nullable=False),
        sa.Column("run_id", S(40), nullable=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("txn_seq", B, nullable=False),
        sa.Column("recorded_at", B, nullable=False),
        sa.Column("published_at", B, nullable=False),
        sa.Column("changes", B, nullable=False),
        sa.Column("first_version_id", B),
        sa.Column("counts", T, nullable=False),
        sa.Column("prev_payload_id", S(32)),
        sa.Column("prev_published_at", B),
        sa.Column("retracted_at", B),
        sa.Column("retracted_by", S(40)),
    )
    op.create_index("ix_applications_payload", "applications", ["payload_id"])
    op.create_index("ix_applications_run", "applications", ["run_id"])
    op.create_index("ix_applications_source_seq", "applications", ["source", "txn_seq"])
    op.create_table(
        "versions",
        sa.Column("version_id", B, primary_key=True, autoincrement=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("key", T, nullable=False),
        sa.Column("valid_from", B, nullable=False),
        sa.Column("recorded_at", B, nullable=False),
        sa.Column("txn_seq", B, nullable=False),
        sa.Column("retracted_at", B),
        sa.Column("retracted_by", S(40)),
        sa.Column("run_id", S(40), nullable=False),
        sa.Column("payload_id", S(32), nullable=False),
        sa.Column("backfill", sa.Boolean, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("change", S(8), nullable=False),
        sa.Column("prev_version_id", B),
        sa.Column("content_hash", B, nullable=False),
        sa.Column("revision", T),
        sa.Column("attributes", T),
    )
    op.create_index("ix_versions_source_key", "versions", ["source", "key", "valid_from"])
    op.create_table(
        "watermarks",
        sa.Column("source", S(64), primary_key=True),
        sa.Column("published_at", B),
        sa.Column("payload_id", S(32)),
        sa.Column("txn_seq", B, nullable=False),
        sa.Column("recorded_at", B, nullable=False),
    )
    op.create_table(
        "outcomes",
        sa.Column("run_id", S(40), nullable=False),
        sa.Column("payload_id", S(32), nullable=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("key", T, nullable=False),
        sa.Column("outcome", S(16), nullable=False),
        sa.Column("revision", T),
        sa.Column("current_revision", T),
        sa.Column("content_hash", B),
        sa.Column("attributes", T),
        sa.Column("recorded_at", B, nullable=False),
    )
    op.create_index("ix_outcomes_run", "outcomes", ["run_id"])
    op.create_table(
        "outbox",
        sa.Column(
            "outbox_id",
            B().with_variant(sa.Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("source", S(64), nullable=False),
        sa.Column("run_id", S(40), nullable=False),
        sa.Column("payload_id", S(32), nullable=False),
        sa.Column("topic", S(32), nullable=False),
        sa.Column("status", S(16), nullable=False),
        sa.Column("idempotency_key", S(200), nullable=False, unique=True),
        sa.Column("changes", B, nullable=False),
        sa.Column("body", T, nullable=False),
        sa.Column("created_at", B, nullable=False),
    )
    op.create_index("ix_outbox_status", "outbox", ["status", "outbox_id"])
    op.create_table(
        "leases",
        sa.Column("source", S(64), primary_key=True),
        sa.Column("holder", S(200)),
        sa.Column("run_id", S(40)),
        sa.Column("acquired_at", B),
        sa.Column("expires_at", B),
    )
    op.create_table(
        "counters",
        sa.Column("name", S(32), primary_key=True),
        sa.Column("value", B, nullable=False),
    )
    op.bulk_insert(
        sa.table("counters", sa.column("name", S), sa.column("value", B)),
        [
            {"name": "version_id", "value": 0},
            # identifies this store, so local caches can never be mistaken across stores
            {"name": "store_id", "value": secrets.randbits(62)},
        ],
    )
    op.execute(
        "CREATE VIEW changes AS "
        "SELECT v.run_id, v.payload_id, v.source, v.key, v.change, v.valid_from, "
        "v.recorded_at, v.version_id, v.retracted_at, p.attributes AS before, "
        "v.attributes AS after "
        "FROM versions v LEFT JOIN versions p ON p.version_id = v.prev_version_id"
    )


def downgrade() -> None:
    op.execute("DROP VIEW changes")
    for name in (
        "counters",
        "leases",
        "outbox",
        "outcomes",
        "watermarks",
        "versions",
        "applications",
        "runs",
        "payloads",
    ):
        op.drop_table(name)
