"""Ledger tables (SQLAlchemy Core). Created and upgraded only by Alembic migrations.

Instants are BIGINT microseconds since the epoch, UTC. Booleans are SMALLINT-free
`Boolean` (INTEGER 0/1 on SQLite, boolean on PostgreSQL).

History (`versions`) is append-only: the only column ever updated is `retracted_at`
(and `retracted_by`). `valid_to` is not stored: it is derived at query time as the
next non-retracted version's `valid_from` for the same key, as known at the query's
transaction time. `watermarks` is a derived index written in the same transaction as
the versions it summarises. The diff's working state (key, content hash per entity)
is not a table: it is recomputed from `versions` when needed and cached locally as an
Arrow file (see ledger/statecache.py).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()
# Features keep their own tables on this metadata: notify/tables.py (subscribers, deliveries).

payloads = Table(
    "payloads",
    metadata,
    Column("payload_id", String(32), primary_key=True),
    Column("source", String(64), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("published_at", BigInteger, nullable=False),
    Column("fetched_at", BigInteger, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("original_name", Text),
    Column("content_type", String(200)),
    Column("indexed_at", BigInteger, nullable=False),
    # the layer's CRS as stated (GIS payloads) and the payload's field names in the
    # order it states them (JSON list), both set when the payload is applied (0008)
    Column("crs", Text),
    Column("fields", Text),
    UniqueConstraint("source", "published_at", name="uq_payloads_source_published"),
    Index("ix_payloads_source_fetched", "source", "fetched_at"),  # the last fetch (0014)
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(40), primary_key=True),
    Column("source", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
    Column("holder", String(200), nullable=False),
    Column("parent_run_id", String(40)),
    Column("payloads", Integer, nullable=False, server_default="0"),
    Column("changes", BigInteger, nullable=False, server_default="0"),
    Column("error", Text),
    # a backfill's requested window [window_start, window_end] and the JSON list of its
    # interruptions and resumptions (migration 0007)
    Column("window_start", BigInteger),
    Column("window_end", BigInteger),
    Column("resumptions", Text),
    Index("ix_runs_source_started", "source", "started_at"),
    Index("ix_runs_status_source", "status", "source"),  # runs held for review (0014)
)

# One row per application of a payload (written in the payload's own transaction).
applications = Table(
    "applications",
    metadata,
    Column("payload_id", String(32), nullable=False),
    Column("run_id", String(40), nullable=False),
    Column("source", String(64), nullable=False),
    Column("txn_seq", BigInteger, nullable=False),
    Column("recorded_at", BigInteger, nullable=False),
    Column("published_at", BigInteger, nullable=False),
    Column("changes", BigInteger, nullable=False),
    # the payload's versions have ids first_version_id .. first_version_id + changes - 1
    Column("first_version_id", BigInteger),
    Column("counts", Text, nullable=False),
    Column("prev_payload_id", String(32)),
    Column("prev_published_at", BigInteger),
    Column("retracted_at", BigInteger),
    Column("retracted_by", String(40)),
    Index("ix_applications_payload", "payload_id"),
    Index("ix_applications_run", "run_id"),
    Index("ix_applications_source_seq", "source", "txn_seq", unique=True),  # unique: 0011
)

# A version's `change` as stored (migration 0011): its code, the index of its name here.
CHANGE_NAMES: tuple[str, ...] = ("added", "changed", "deleted")
CHANGE_CODES: dict[str, int] = {name: code for code, name in enumerate(CHANGE_NAMES)}

# Compact layout (migrations 0010, 0011, issue 17): `version_id` is SQLite's rowid; the run and
# payload of a version are its application's (`applications` row with the same source
# and txn_seq); `attributes` is stored in the compact form of ledger/encoding/codec.py
# against the codebook `fields_id` of `field_lists` (NULL: stored as canonical JSON);
# `change` is a small integer (CHANGE_NAMES[change] is its name).
# Read attribute texts through ledger/encoding/codebooks.py (`Decoder`), never raw.
versions = Table(
    "versions",
    metadata,
    Column(
        "version_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=False,
    ),
    # fixed-width columns first (no alignment padding between them on PostgreSQL)
    Column("valid_from", BigInteger, nullable=False),
    Column("recorded_at", BigInteger, nullable=False),
    Column("txn_seq", BigInteger, nullable=False),
    Column("content_hash", BigInteger, nullable=False),
    Column("prev_version_id", BigInteger),
    Column("retracted_at", BigInteger),
    # GIS sources (0008): the hash of the geometry's canonical form (formats/spatial/geometry.py),
    # which is what a geometry change is judged on, and the geometry as stated (GeoJSON)
    Column("geometry_hash", BigInteger),
    Column("fields_id", Integer),
    Column("change", SmallInteger, nullable=False),  # CHANGE_CODES (0011)
    Column("backfill", Boolean, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("source", String(64), nullable=False),
    Column("key", Text, nullable=False),
    Column("retracted_by", String(40)),
    Column("revision", Text),
    Column("attributes", Text),
    Column("geometry", Text),
    Index("ix_versions_source_key", "source", "key", "valid_from"),
)

# Per-source codebooks of the compact attribute texts (ledger/encoding/codec.py, 0010):
# write-once rows, a new one when a payload's fields are not those of the last one.
field_lists = Table(
    "field_lists",
    metadata,
    Column("fields_id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("codebook", Text, nullable=False),
    Index("ix_field_lists_source", "source", "fields_id"),
)

# Each codebook's tokens and the strings they stand for (migration 0012), one row per
# token, written with the codebook (`codebooks.choose`): what the `changes` view decodes
# stored texts with in plain SQL, for a person reading the store with sqlite3 or psql
# (`n`: the order replacing them one after the other decodes a text exactly).
field_tokens = Table(
    "field_tokens",
    metadata,
    Column("fields_id", Integer, primary_key=True, autoincrement=False),
    Column("n", Integer, primary_key=True, autoincrement=False),
    Column("token", String(2), nullable=False),
    Column("string", Text, nullable=False),
)

watermarks = Table(
    "watermarks",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("published_at", BigInteger),
    Column("payload_id", String(32)),
    Column("txn_seq", BigInteger, nullable=False),
    Column("recorded_at", BigInteger, nullable=False),
)

# Per-key verdicts that did not become versions (superseded, unresolved).
outcomes = Table(
    "outcomes",
    metadata,
    Column("run_id", String(40), nullable=False),
    Column("payload_id", String(32), nullable=False),
    Column("source", String(64), nullable=False),
    Column("key", Text, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("revision", Text),
    Column("current_revision", Text),
    Column("content_hash", BigInteger),
    Column("attributes", Text),
    Column("geometry", Text),  # GIS sources (0008)
    Column("recorded_at", BigInteger, nullable=False),
    Index("ix_outcomes_run", "run_id"),
)

# Transactional outbox: one row per applied payload with changes (the announcement of
# that payload's change set), written in the payload's own transaction.
outbox = Table(
    "outbox",
    metadata,
    Column(
        "outbox_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("source", String(64), nullable=False),
    Column("run_id", String(40), nullable=False),
    Column("payload_id", String(32), nullable=False),
    Column("topic", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("idempotency_key", String(200), nullable=False, unique=True),
    Column("changes", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_outbox_status", "status", "outbox_id"),
)

# "Not observed" stretches of a source's valid time [start_at, end_at): written by a
# backfill/replay for publication days missing from the archive, or by hand.
gaps = Table(
    "gaps",
    metadata,
    Column(
        "gap_id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("source", String(64), nullable=False),
    Column("start_at", BigInteger, nullable=False),
    Column("end_at", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    Column("run_id", String(40), nullable=False),
    Column("recorded_at", BigInteger, nullable=False),
    Column("retracted_at", BigInteger),
    Column("retracted_by", String(40)),
    Index("ix_gaps_source_start", "source", "start_at"),
    Index("ix_gaps_run", "run_id"),
    Index("ix_gaps_end", "end_at"),  # the gaps after the watermarks (0014)
)

# A frozen source refuses live runs (backfill, replay and retraction are allowed).
freezes = Table(
    "freezes",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("frozen_at", BigInteger, nullable=False),
    Column("reason", Text),
)

leases = Table(
    "leases",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("holder", String(200)),
    Column("run_id", String(40)),
    Column("acquired_at", BigInteger),
    Column("expires_at", BigInteger),
    Column("heartbeat_at", BigInteger),  # renewed by a long-running holder (migration 0005)
    # "<schema revision> <holder>" of the release that took it (0015; docs/upgrading.md)
    Column("holder_schema", String(300)),
)

# The oldest schema revision whose feedledger may run against this store (one row,
# migration 0015): a release that does not know it refuses the store (ledger/engine.py).
schema_floor = Table(
    "schema_floor",
    metadata,
    Column("floor", String(64), primary_key=True),
)

# What the scheduler knows of each source between runs (migration 0005).
schedule_state = Table(
    "schedule_state",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("first_attempt_at", BigInteger),
    Column("last_attempt_at", BigInteger),
    Column("last_success_at", BigInteger),  # last fetch that got the expected publication
    Column("last_outcome", String(32)),
    Column("last_error", Text),
    Column("failures", Integer, nullable=False, server_default="0"),  # consecutive
    Column("next_attempt_at", BigInteger),  # not before (backoff, or the next publication)
    Column("stale_alerted_at", BigInteger),  # the open stale episode was announced
    Column("failure_alerted_at", BigInteger),  # the open failure episode was announced
    Column("hold_alerted_at", BigInteger),  # recovery = "hold": operator told
    # the last successful fetch of a source serving its current state (a portal, a
    # URL), whether or not it found anything new: an observation (invariant 12, 0012)
    Column("observed_at", BigInteger),
    Column("observed_published_at", BigInteger),  # the publisher date stated then
    Column("date_problem", Text),  # that date ahead of the clock or gone back (0012)
)

# What successful fetches observed (invariant 12, migration 0012): per source and stated
# publisher date (a portal's last edit, a URL's Last-Modified), the latest instant a
# fetch found the source still at that state -- the state held over
# [published_at, observed_until], so the days due in between are observed, never gaps.
observations = Table(
    "observations",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("published_at", BigInteger, primary_key=True),
    Column("observed_until", BigInteger, nullable=False),
)

counters = Table(
    "counters",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

# Writes made over the HTTP API (`feedledger serve`): who (a token's label), when, what,
# on which run or source (migration 0009). `detail`: the request body's JSON and the
# result, as text.
write_audit = Table(
    "write_audit",
    metadata,
    Column("audit_id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", String(32), nullable=False),
    Column("source", String(64)),
    Column("run_id", String(40)),
    Column("detail", Text),
    Index("ix_write_audit_run", "run_id"),
    Index("ix_write_audit_source", "source"),
)
