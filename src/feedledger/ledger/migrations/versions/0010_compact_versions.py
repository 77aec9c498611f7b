"""Compact versions (issue 17): attribute texts stored against a per-source codebook
(`field_lists`, ledger/encoding/codec.py), no run/payload id texts on each version (they
are its application's: same source and txn_seq), and on SQLite the version id is the
rowid. Every version is copied into the new layout, one INSERT ... SELECT per source
(the encoding is SQL `replace`, decodable by the codec like the writer's own).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from feedledger.ledger.encoding.codec import SAMPLE_ROWS, Codebook, from_text, gains, plan

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text

# columns both layouts have, in the new layout's order
_COMMON = [
    "version_id",
    "valid_from",
    "recorded_at",
    "txn_seq",
    "content_hash",
    "prev_version_id",
    "retracted_at",
    "geometry_hash",
    "backfill",
    "deleted",
    "source",
    "key",
    "change",
    "retracted_by",
    "revision",
]


def _compact_table(name: str, sqlite: bool) -> None:
    op.create_table(
        name,
        sa.Column(
            "version_id",
            sa.Integer if sqlite else B,
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("valid_from", B, nullable=False),
        sa.Column("recorded_at", B, nullable=False),
        sa.Column("txn_seq", B, nullable=False),
        sa.Column("content_hash", B, nullable=False),
        sa.Column("prev_version_id", B),
        sa.Column("retracted_at", B),
        sa.Column("geometry_hash", B),
        sa.Column("fields_id", sa.Integer),
        sa.Column("backfill", sa.Boolean, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("key", T, nullable=False),
        sa.Column("change", S(8), nullable=False),
        sa.Column("retracted_by", S(40)),
        sa.Column("revision", T),
        sa.Column("attributes", T),
        sa.Column("geometry", T),
    )


_NEST = 10  # replace() calls nested in one expression (SQLite's parser stack is finite)


def _replacing(
    inner: str, passthrough: list[str], pairs: list[tuple[str, str]]
) -> tuple[str, dict[str, str]]:
    """A SELECT of `passthrough` and `a`: `inner` (which selects `passthrough` and
    `a`) with each pair's first string replaced by its second in `a`, one pair after
    the other, _NEST pairs per derived table, the strings as bound parameters."""
    cols = ", ".join(passthrough)
    sql, params = inner, {}
    for start in range(0, len(pairs), _NEST):
        expr = "a"
        for i, (old, new) in enumerate(pairs[start : start + _NEST], start):
            expr = f"replace({expr}, :o{i}, :n{i})"
            params[f"o{i}"], params[f"n{i}"] = old, new
        sql = f"SELECT {cols}, {expr} AS a FROM ({sql}) t{start}"
    return sql, params


# the `changes` view of 0001, now with each version's run and payload from its
# application; before/after stay as stored (compact form, with their codebooks' ids)
_CHANGES_VIEW = (
    "CREATE VIEW changes AS "
    "SELECT a.run_id, a.payload_id, v.source, v.key, v.change, v.valid_from, "
    "v.recorded_at, v.version_id, v.retracted_at, p.attributes AS before, "
    "v.attributes AS after, p.fields_id AS before_fields_id, v.fields_id AS after_fields_id "
    "FROM versions v JOIN applications a ON a.source = v.source AND a.txn_seq = v.txn_seq "
    "LEFT JOIN versions p ON p.version_id = v.prev_version_id"
)
_WIDE_CHANGES_VIEW = (
    "CREATE VIEW changes AS "
    "SELECT v.run_id, v.payload_id, v.source, v.key, v.change, v.valid_from, "
    "v.recorded_at, v.version_id, v.retracted_at, p.attributes AS before, "
    "v.attributes AS after "
    "FROM versions v LEFT JOIN versions p ON p.version_id = v.prev_version_id"
)


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    op.execute("DROP VIEW changes")
    op.create_table(
        "field_lists",
        sa.Column("fields_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("source", S(64), nullable=False),
        sa.Column("codebook", T, nullable=False),
    )
    op.create_index("ix_field_lists_source", "field_lists", ["source", "fields_id"])
    _compact_table("versions_compact", sqlite)
    field_lists = sa.table(
        "field_lists", sa.column("fields_id"), sa.column("source"), sa.column("codebook")
    )
    common = ", ".join(_COMMON)
    sources = [r[0] for r in conn.execute(sa.text("SELECT DISTINCT source FROM versions"))]
    for source in sorted(sources):
        sample = conn.execute(
            sa.text(
                "SELECT attributes FROM versions WHERE source = :s AND attributes IS NOT NULL "
                "ORDER BY version_id DESC LIMIT :n"
            ),
            {"s": source, "n": SAMPLE_ROWS},
        )
        book = Codebook(plan(gains(str(r[0]) for r in sample)))
        fields_id = None
        if book.patterns:
            fields_id = sorted(sources).index(source) + 1
            conn.execute(
                sa.insert(field_lists).values(
                    fields_id=fields_id, source=source, codebook=book.to_text()
                )
            )
        passthrough = [*_COMMON, "geometry"]
        inner = f"SELECT {', '.join(passthrough)}, attributes AS a FROM versions WHERE source = :s"
        select, params = _replacing(
            inner, passthrough, list(zip(book.patterns, book.tokens, strict=True))
        )
        conn.execute(
            sa.text(
                f"INSERT INTO versions_compact ({common}, geometry, fields_id, attributes) "
                f"SELECT {common}, geometry, CAST(:fid AS INTEGER), a FROM ({select}) done"
            ),
            {"s": source, "fid": fields_id, **params},
        )
    if not sqlite and sources:  # ids were given above: the sequence goes on after them
        op.execute(
            "SELECT setval(pg_get_serial_sequence('field_lists', 'fields_id'), "
            "(SELECT max(fields_id) FROM field_lists))"
        )
    op.drop_table("versions")
    op.rename_table("versions_compact", "versions")
    if not sqlite:
        op.execute("ALTER INDEX versions_compact_pkey RENAME TO versions_pkey")
    op.create_index("ix_versions_source_key", "versions", ["source", "key", "valid_from"])
    op.execute(_CHANGES_VIEW)


def downgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    op.execute("DROP VIEW changes")
    op.create_table(
        "versions_wide",
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
        sa.Column("geometry", T),
        sa.Column("geometry_hash", B),
    )
    books = list(conn.execute(sa.text("SELECT fields_id, codebook FROM field_lists")))
    groups: list[tuple[str, dict[str, object], list[tuple[str, str]]]] = [
        ("v.fields_id IS NULL", {}, [])
    ]
    for fields_id, text in books:
        book = from_text(str(text))
        pairs = list(zip(book.tokens, book.patterns, strict=True))
        groups.append(("v.fields_id = :fid", {"fid": int(fields_id)}, pairs))
    passthrough = [*_COMMON, "geometry", "run_id", "payload_id"]
    picked = ", ".join(f"a.{c}" if c in ("run_id", "payload_id") else f"v.{c}" for c in passthrough)
    for where, extra, pairs in groups:
        inner = (
            f"SELECT {picked}, v.attributes AS a FROM versions v JOIN applications a "
            f"ON a.source = v.source AND a.txn_seq = v.txn_seq WHERE {where}"
        )
        select, params = _replacing(inner, passthrough, pairs)
        conn.execute(
            sa.text(
                f"INSERT INTO versions_wide ({', '.join(passthrough)}, attributes) "
                f"SELECT {', '.join(passthrough)}, a FROM ({select}) done"
            ),
            {**extra, **params},
        )
    op.drop_table("versions")
    op.drop_index("ix_field_lists_source", table_name="field_lists")
    op.drop_table("field_lists")
    op.rename_table("versions_wide", "versions")
    if not sqlite:
        op.execute("ALTER INDEX versions_wide_pkey RENAME TO versions_pkey")
    op.create_index("ix_versions_source_key", "versions", ["source", "key", "valid_from"])
    op.execute(_WIDE_CHANGES_VIEW)
