"""The `changes` view shows attribute texts as canonical JSON again (issue 28 A7): since
compact versions (0010, 0011) its `before`/`after` were the stored texts, full of
codebook tokens, for whoever reads the store with `sqlite3` or `psql`.

Decoding happens in plain SQL, so that it works from any client (a function registered
on feedledger's own connections would not exist in the `sqlite3` shell): a new table
`field_tokens` holds each codebook's tokens and the strings they stand for (written
with the codebook from now on, `codebooks.choose`; filled here for the codebooks there
are), and the view replaces them one after the other, a row's texts only when the row
is read: on SQLite in a recursive query, on PostgreSQL in a PL/pgSQL function
(`feedledger_decode(fields_id, text)`, usable on its own too). The view's
`before_fields_id`/`after_fields_id` columns, which only served to decode the texts by
hand, are gone.

Revision ID: 0012_decoded_changes
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from feedledger.ledger.encoding.codec import from_text

revision = "0012_decoded_changes"
down_revision = "0011"
branch_labels = None
depends_on = None

_NAMES = ("added", "changed", "deleted")  # schema.CHANGE_NAMES when this was written
_CHANGE_NAME = " ".join(f"WHEN {code} THEN '{name}'" for code, name in enumerate(_NAMES))


def _decoded(alias: str, postgresql: bool) -> str:
    """The canonical text of version `alias`'s attributes: its codebook's tokens
    replaced one after the other (NULL stays NULL; no codebook: the text as stored).
    SQLite: a recursive query, one token a step; PostgreSQL, where such a query costs
    ~15 ms a row: the function `feedledger_decode`, a loop over the tokens the text
    holds."""
    if postgresql:
        return f"feedledger_decode({alias}.fields_id, {alias}.attributes)"
    return (
        "(WITH RECURSIVE d(i, s) AS ("
        f"SELECT 0, {alias}.attributes UNION ALL "
        "SELECT d.i + 1, replace(d.s, t.token, t.string) FROM d JOIN field_tokens t "
        f"ON t.fields_id = {alias}.fields_id AND t.n = d.i) "
        "SELECT s FROM d ORDER BY i DESC LIMIT 1)"
    )


# PostgreSQL: `field_tokens` is found on the search path the migration ran with (the
# store's schema), whatever the path of the session reading the view
_PG_DECODE = """
CREATE FUNCTION feedledger_decode(fid integer, stored text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    s text := stored;
BEGIN
    IF stored IS NULL OR fid IS NULL THEN
        RETURN stored;
    END IF;
    FOR r IN SELECT token, string FROM field_tokens
             WHERE fields_id = fid AND strpos(stored, token) > 0 ORDER BY n LOOP
        s := replace(s, r.token, r.string);
    END LOOP;
    RETURN s;
END
$$
"""


def _decoded_view(postgresql: bool) -> str:
    return (
        "CREATE VIEW changes AS "
        f"SELECT a.run_id, a.payload_id, v.source, v.key, CASE v.change {_CHANGE_NAME} END "
        "AS change, v.valid_from, v.recorded_at, v.version_id, v.retracted_at, "
        f"{_decoded('p', postgresql)} AS before, {_decoded('v', postgresql)} AS after "
        "FROM versions v JOIN applications a "
        "ON a.source = v.source AND a.txn_seq = v.txn_seq "
        "LEFT JOIN versions p ON p.version_id = v.prev_version_id"
    )


# the view of 0011, stored texts as they are
_STORED_VIEW = (
    "CREATE VIEW changes AS "
    f"SELECT a.run_id, a.payload_id, v.source, v.key, CASE v.change {_CHANGE_NAME} END "
    "AS change, v.valid_from, "
    "v.recorded_at, v.version_id, v.retracted_at, p.attributes AS before, "
    "v.attributes AS after, p.fields_id AS before_fields_id, "
    "v.fields_id AS after_fields_id "
    "FROM versions v JOIN applications a ON a.source = v.source AND a.txn_seq = v.txn_seq "
    "LEFT JOIN versions p ON p.version_id = v.prev_version_id"
)


def upgrade() -> None:
    conn = op.get_bind()
    tokens = op.create_table(
        "field_tokens",
        sa.Column("fields_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("token", sa.String(2), nullable=False),
        sa.Column("string", sa.Text, nullable=False),
    )
    assert tokens is not None
    rows = []
    for fields_id, text in conn.execute(sa.text("SELECT fields_id, codebook FROM field_lists")):
        book = from_text(str(text))
        strings = book.patterns + book.values
        rows += [
            {"fields_id": int(fields_id), "n": n, "token": token, "string": string}
            for n, (token, string) in enumerate(zip(book.tokens, strings, strict=True))
        ]
    if rows:
        op.bulk_insert(tokens, rows)
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        op.execute(_PG_DECODE)
    op.execute("DROP VIEW changes")
    op.execute(_decoded_view(postgresql))


def downgrade() -> None:
    op.execute("DROP VIEW changes")
    op.execute(_STORED_VIEW)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION feedledger_decode(integer, text)")
    op.drop_table("field_tokens")
