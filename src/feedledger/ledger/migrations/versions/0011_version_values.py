"""Versions of fewer bytes (issue 17): frequent values in attribute texts as two-byte
tokens of the codebook (ledger/encoding/codec.py value segments), `change` as a small
integer (schema.CHANGE_NAMES), and applications unique on (source, txn_seq) (a
version's run and payload are those of its source's application with its txn_seq).

Each source gets a codebook planned from its newest texts; every one of its versions
is copied into the new table with its text decoded (by the codebook it was written
with) and encoded again (by the new one), one INSERT ... SELECT per (source, old
codebook): SQL `replace`, one string after the other, longest first -- decodable by the
codec like the writer's own (attr_codec.PAIR_SECONDS says why).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from feedledger.ledger.encoding.codec import SAMPLE_ROWS, Codebook, from_text, plan_book

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

B = sa.BigInteger
S = sa.String
T = sa.Text
_NAMES = ("added", "changed", "deleted")  # schema.CHANGE_NAMES when this was written

# columns copied as they are, in the new layout's order
_SAME = [
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
    "retracted_by",
    "revision",
    "geometry",
]


def _table(name: str, sqlite: bool, change: sa.types.TypeEngine[Any]) -> None:
    op.create_table(
        name,
        sa.Column("version_id", sa.Integer if sqlite else B, primary_key=True, autoincrement=False),
        sa.Column("valid_from", B, nullable=False),
        sa.Column("recorded_at", B, nullable=False),
        sa.Column("txn_seq", B, nullable=False),
        sa.Column("content_hash", B, nullable=False),
        sa.Column("prev_version_id", B),
        sa.Column("retracted_at", B),
        sa.Column("geometry_hash", B),
        sa.Column("fields_id", sa.Integer),
        sa.Column("change", change, nullable=False),
        sa.Column("backfill", sa.Boolean, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("source", S(64), nullable=False),
        sa.Column("key", T, nullable=False),
        sa.Column("retracted_by", S(40)),
        sa.Column("revision", T),
        sa.Column("attributes", T),
        sa.Column("geometry", T),
    )


_NEST = 10  # replace() calls nested in one expression (SQLite's parser stack is finite)


def _replacing(inner: str, pairs: list[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """A SELECT of every _SAME column, `change`, `f` and `a`: `inner` (which selects them)
    with each pair's first string replaced by its second in `a`, one pair after the
    other, _NEST pairs per derived table, the strings as bound parameters."""
    cols = ", ".join([*_SAME, "change", "f"])
    sql, params = inner, {}
    for start in range(0, len(pairs), _NEST):
        expr = "a"
        for i, (old, new) in enumerate(pairs[start : start + _NEST], start):
            expr = f"replace({expr}, :o{i}, :n{i})"
            params[f"o{i}"], params[f"n{i}"] = old, new
        sql = f"SELECT {cols}, {expr} AS a FROM ({sql}) t{start}"
    return sql, params


def _encoding(book: Codebook) -> list[tuple[str, str]]:
    """(string, token) of `book`, longest string first (a value segment before its
    pattern)."""
    pairs = list(zip(book.patterns + book.values, book.tokens, strict=True))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def _decoding(book: Codebook | None) -> list[tuple[str, str]]:
    """(token, string) of `book`, two-character tokens first."""
    if book is None:
        return []
    pairs = list(zip(book.tokens, book.patterns + book.values, strict=True))
    return sorted(pairs, key=lambda pair: -len(pair[0]))


_CHANGE_CODE = " ".join(f"WHEN '{name}' THEN {code}" for code, name in enumerate(_NAMES))
_CHANGE_NAME = " ".join(f"WHEN {code} THEN '{name}'" for code, name in enumerate(_NAMES))


def _changes_view(change: str) -> str:
    """The `changes` view of 0010 (`change`: the expression of its `change` column)."""
    return (
        "CREATE VIEW changes AS "
        f"SELECT a.run_id, a.payload_id, v.source, v.key, {change} AS change, v.valid_from, "
        "v.recorded_at, v.version_id, v.retracted_at, p.attributes AS before, "
        "v.attributes AS after, p.fields_id AS before_fields_id, "
        "v.fields_id AS after_fields_id "
        "FROM versions v JOIN applications a ON a.source = v.source AND a.txn_seq = v.txn_seq "
        "LEFT JOIN versions p ON p.version_id = v.prev_version_id"
    )


def _sample(conn: sa.Connection, source: str, books: dict[int, Codebook]) -> list[str]:
    """The canonical texts of `source`'s newest versions (at most SAMPLE_ROWS)."""
    rows = conn.execute(
        sa.text(
            "SELECT fields_id, attributes FROM versions WHERE source = :s "
            "AND attributes IS NOT NULL ORDER BY version_id DESC LIMIT :n"
        ),
        {"s": source, "n": SAMPLE_ROWS},
    )
    return [str(a) if f is None else books[int(f)].decode(str(a)) for f, a in rows]


def _swap(sqlite: bool, new: str) -> None:
    op.drop_table("versions")
    op.rename_table(new, "versions")
    if not sqlite:
        op.execute(f"ALTER INDEX {new}_pkey RENAME TO versions_pkey")
    op.create_index("ix_versions_source_key", "versions", ["source", "key", "valid_from"])


def _recoder(conn: sa.Connection, pairs: list[tuple[str, str]]) -> str:
    """SQLite: a function of this connection applying `pairs` like `_replacing`'s
    nested `replace` calls (one after the other), and the SQL calling it."""

    def recode(text: str | None) -> str | None:
        if text is None:
            return None
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    raw = conn.connection.dbapi_connection
    assert raw is not None
    raw.create_function("feedledger_0011_recode", 1, recode, deterministic=True)
    return "feedledger_0011_recode(attributes)"


def _copy(
    conn: sa.Connection,
    into: str,
    change: str,
    where: str,
    params: dict[str, object],
    pairs: list[tuple[str, str]],
    fields_id: int | str | None,
) -> None:
    """Copy the versions `where` says into `into`, `change` (an SQL expression) and
    the attribute text (`pairs` applied) converted, written against `fields_id`
    ("keep": the codebook each was written with)."""
    same = ", ".join(_SAME)
    text = "attributes"
    if pairs and conn.dialect.name == "sqlite":  # its parser's stack holds ~100 levels
        text = _recoder(conn, pairs)
        pairs = []
    inner = (
        f"SELECT {same}, {change} AS change, fields_id AS f, {text} AS a "
        f"FROM versions WHERE {where}"
    )
    select, replaced = _replacing(inner, pairs)
    fid = "f" if fields_id == "keep" else "CAST(:fid AS INTEGER)"
    conn.execute(
        sa.text(
            f"INSERT INTO {into} ({same}, change, fields_id, attributes) "
            f"SELECT {same}, change, {fid}, a FROM ({select}) done"
        ),
        {**params, **replaced, "fid": None if fields_id == "keep" else fields_id},
    )


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    op.execute("DROP VIEW changes")
    op.drop_index("ix_applications_source_seq", table_name="applications")
    op.create_index(
        "ix_applications_source_seq", "applications", ["source", "txn_seq"], unique=True
    )
    _table("versions_valued", sqlite, sa.SmallInteger())
    field_lists = sa.table("field_lists", sa.column("source"), sa.column("codebook"))
    books = {
        int(i): from_text(str(t))
        for i, t in conn.execute(sa.text("SELECT fields_id, codebook FROM field_lists"))
    }
    change = f"CASE change {_CHANGE_CODE} END"
    groups = conn.execute(sa.text("SELECT DISTINCT source, fields_id FROM versions")).all()
    for source in sorted({str(s) for s, _ in groups}):
        book = plan_book(_sample(conn, source, books))
        fields_id = None
        if book.values:
            conn.execute(sa.insert(field_lists).values(source=source, codebook=book.to_text()))
            fields_id = int(
                conn.execute(sa.text("SELECT max(fields_id) FROM field_lists")).scalar_one()
            )
        for old in sorted({f for s, f in groups if s == source}, key=lambda f: f or 0):
            where = "source = :s AND " + ("fields_id IS NULL" if old is None else "fields_id = :f")
            params = {"s": source, "f": old}
            if fields_id is None:  # nothing to gain: the text stays as it was
                _copy(conn, "versions_valued", change, where, params, [], "keep")
                continue
            pairs = _decoding(books.get(int(old)) if old is not None else None)
            pairs += _encoding(book)
            _copy(conn, "versions_valued", change, where, params, pairs, fields_id)
    _swap(sqlite, "versions_valued")
    op.execute(_changes_view(f"CASE v.change {_CHANGE_NAME} END"))


def downgrade() -> None:
    """Back to 0010: texts written against a codebook with values decoded whole
    (canonical, fields_id NULL), those codebooks dropped, `change` as text."""
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    op.execute("DROP VIEW changes")
    _table("versions_named", sqlite, S(8))
    books = {
        int(i): from_text(str(t))
        for i, t in conn.execute(sa.text("SELECT fields_id, codebook FROM field_lists"))
    }
    change = f"CASE change {_CHANGE_NAME} END"
    valued = sorted(i for i, b in books.items() if b.values)
    listed = ", ".join(str(i) for i in valued) or "NULL"
    kept = f"fields_id IS NULL OR fields_id NOT IN ({listed})"
    _copy(conn, "versions_named", change, kept, {}, [], "keep")
    for fields_id in valued:
        pairs = _decoding(books[fields_id])
        _copy(conn, "versions_named", change, "fields_id = :f", {"f": fields_id}, pairs, None)
        conn.execute(sa.text("DELETE FROM field_lists WHERE fields_id = :f"), {"f": fields_id})
    _swap(sqlite, "versions_named")
    op.drop_index("ix_applications_source_seq", table_name="applications")
    op.create_index("ix_applications_source_seq", "applications", ["source", "txn_seq"])
    op.execute(_changes_view("v.change"))
