"""Versions of at most 200 bytes: codebooks with value segments (two-byte tokens for a
field's frequent values, ledger/encoding/codec.py) decode to exactly the canonical text,
whether written by the codec or by migration 0011's SQL; `change` stored as a code;
migration 0011 converts a store in the 0010 layout (and back), on both backends."""

from __future__ import annotations

import importlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.config import Workspace
from feedledger.ledger import engine as eng
from feedledger.ledger.encoding import Decoder
from feedledger.ledger.encoding.codec import (
    PAIR_TOKENS,
    PREFIXES,
    Codebook,
    covers,
    from_text,
    gains,
    plan_book,
    value_gains,
)
from feedledger.ledger.schema import CHANGE_NAMES
from helpers import BACKENDS, Cli, backend_store
from ledger.previous_release import FIXTURE, canonical, load_previous_release

M11: Any = importlib.import_module("feedledger.ledger.migrations.versions.0011_version_values")

# -- the codec ----------------------------------------------------------------------------

_names = st.sampled_from(["a", "ab", "b", "zone", "owner", 'q"t', "x\\y", "\u00e9", "c\nd"])
# few distinct values, so that a sample sees them again (value segments); some are
# prefixes of others, some hold quotes, commas, braces, escapes and non-ASCII text
_cell = st.sampled_from(
    ["R", "R-1", "R-10", "SPRINGFIELD", "SPRINGFIELD HEIGHTS", 'a "q"', "x,{y}", "b\\s",
     "\u00e9\u4e2d", "", "7", "\t"]
)  # fmt: skip
_scalar = st.one_of(_cell, st.none(), st.booleans(), st.sampled_from([1, 10, -3, 1.5]))
_value = st.one_of(_scalar, st.lists(_scalar, max_size=2), st.dictionaries(_names, _scalar))
_records = st.lists(st.dictionaries(_names, _value, max_size=6), min_size=1, max_size=30)


def _sql_encode(book: Codebook, texts: list[str], old: Codebook | None) -> list[str]:
    """`texts` (written against `old`, or canonical) re-encoded by migration 0011's SQL."""
    pairs = M11._decoding(old) + M11._encoding(book)
    select, params = M11._replacing("SELECT ? AS a", pairs)
    select = select.replace("?", ":t")
    cols = ", ".join([*M11._SAME, "change", "f"])
    select = select.replace(f"SELECT {cols}, ", "SELECT ")
    out = []
    with sqlite3.connect(":memory:") as conn:
        for text in texts:
            (stored,) = conn.execute(f"SELECT a FROM ({select})", {"t": text, **params}).fetchone()
            out.append(stored)
    return out


@settings(max_examples=200, deadline=None)
@given(records=_records, planned_from=_records)
def test_value_tokens_decode_to_the_text_whatever_codebook(
    records: list[dict[str, Any]], planned_from: list[dict[str, Any]]
) -> None:
    texts = [canonical(r) for r in records]
    for sample in (texts, [canonical(r) for r in planned_from]):
        book = plan_book(sample)
        assert from_text(book.to_text()).tokens == book.tokens
        stored = book.encode_series(pl.Series([*texts, None], dtype=pl.String))
        assert book.decode_series(stored).to_list() == [*texts, None]
        assert [book.decode(s) for s in stored.to_list()[:-1]] == texts
        assert all(
            len(s.encode()) <= len(t.encode())
            for s, t in zip(stored.to_list()[:-1], texts, strict=True)
        )
        # migration 0011: SQL replace one string after the other, from canonical texts
        # and from texts a 0010 codebook (patterns only) wrote
        assert [book.decode(s) for s in _sql_encode(book, texts, None)] == texts
        old = Codebook(book.patterns[:5])
        written = old.encode_series(pl.Series(texts, dtype=pl.String)).to_list()
        assert [book.decode(s) for s in _sql_encode(book, written, old)] == texts
        # and its downgrade decodes them back with SQL replace alone
        back = _sql_encode(Codebook([]), _sql_encode(book, texts, None), book)
        assert back == texts


def _parcel(i: int) -> str:
    cities = ["SPRINGFIELD", "SPRINGFIELD", "SPRINGFIELD", "RIVERTON", "CHATHAM"]
    return canonical(
        {
            "parcel_id": f"P{i:08d}",
            "owner": f"OWNER {i * 7919 % 1000}",
            "city": cities[i % 5],
            "zoning": ["R-1", "R-2", "C-1"][i % 3],
            "land_use": ["RESIDENTIAL", "MULTI-FAMILY"][i % 2],
            "acres": f"{i / 1000:.3f}",  # never the same twice
        }
    )


def test_frequent_values_take_two_bytes() -> None:
    texts = [_parcel(i) for i in range(3000)]
    book = plan_book(texts[:1000])
    assert '","city":"SPRINGFIELD' in book.values and '","zoning":"R-1' in book.values
    assert not any("parcel_id" in v for v in book.values)  # never seen twice
    stored = book.encode_series(pl.Series(texts)).to_list()
    assert book.decode_series(pl.Series(stored)).to_list() == texts
    text, one = texts[0], stored[0]
    # {"acres":"0.000","city":"SPRINGFIELD","land_use":"RESIDENTIAL",...}: the values
    # of city, land_use and zoning are in two-byte tokens
    assert one.count(PREFIXES[0]) + one.count(PREFIXES[1]) + one.count(PREFIXES[2]) == 3
    assert len(one.encode()) < len(text.encode()) - 40
    # another day of the same feed keeps the codebook; another schema does not
    later = texts[1500:2500]
    assert covers(book, gains(later), value_gains(later))
    other = [canonical({"id": str(i), "kind": ["a", "b"][i % 2]}) for i in range(100)]
    assert not covers(book, gains(other), value_gains(other))


def test_a_codebook_has_room_for_every_pair_token() -> None:
    values = [f'","v":"{i:04d}' for i in range(len(PAIR_TOKENS))]
    book = Codebook(['","v":"'], values)
    texts = [canonical({"a": "x", "v": f"{i:04d}"}) for i in range(0, len(values), 7)]
    stored = book.encode_series(pl.Series(texts)).to_list()
    assert [book.decode(s) for s in stored] == texts
    assert all(len(s) == len('{"a":"x') + 2 + len('"}') for s in stored)  # the token
    with pytest.raises(ValueError):
        Codebook(['","v":"'], [*values, '","v":"x'])


# -- migration 0011 over a store in the 0010 layout ---------------------------------------


def _contents(url: str) -> dict[int, tuple[str, str | None]]:
    """Every version's change name and canonical attribute text, by version_id."""
    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            names = isinstance(
                conn.execute(sa.text("SELECT change FROM versions LIMIT 1")).scalar(), str
            )
            rows = conn.execute(
                sa.text("SELECT version_id, change, fields_id, attributes FROM versions")
            ).all()
            decode = Decoder(conn)
            return {
                int(r.version_id): (
                    r.change if names else CHANGE_NAMES[r.change],
                    decode.text(r.fields_id, r.attributes),
                )
                for r in rows
            }
    finally:
        engine.dispose()


def _alembic(url: str, target: str, down: bool = False) -> None:
    from alembic import command

    engine = eng.make_engine(url)
    try:
        with engine.begin() as conn:
            (command.downgrade if down else command.upgrade)(eng._config(conn), target)
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_0011_converts_a_0010_store_and_back(backend: str, tmp_path: Path) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    with backend_store(backend, tmp_path) as url:
        load_previous_release(url)
        _alembic(url, "0010")
        before = _contents(url)
        assert {change for change, _ in before.values()} == set(CHANGE_NAMES)
        _alembic(url, "0011")
        assert _contents(url) == before
        engine = eng.make_engine(url)
        try:
            with engine.connect() as conn:
                books = [
                    from_text(t)
                    for (t,) in conn.execute(sa.text("SELECT codebook FROM field_lists"))
                ]
                used = conn.execute(
                    sa.text("SELECT DISTINCT fields_id FROM versions WHERE fields_id IS NOT NULL")
                ).all()
                view = conn.execute(sa.text("SELECT DISTINCT change FROM changes")).all()
        finally:
            engine.dispose()
        assert any(b.values for b in books) and len(used) == 2  # one codebook per source
        assert {c for (c,) in view} == set(CHANGE_NAMES)
        # the store answers every query as the previous release did (at head: the CLI
        # refuses a store behind its schema)
        _alembic(url, "head")
        root = tmp_path / "ws"
        root.mkdir()
        toml = (FIXTURE / "feedledger.toml").read_text(encoding="utf-8")
        toml = toml.replace('url = "sqlite:///.feedledger/ledger.db"', f"url = {json.dumps(url)}")
        (root / "feedledger.toml").write_text(toml, encoding="utf-8")
        cli = Cli(Workspace.load(root / "feedledger.toml"))
        for name, answer in expected["queries"].items():
            args = name.split(" ")
            if args[0] == "snapshot":
                got = cli("snapshot", args[1], "--valid", args[2], "--format", args[3]).stdout
            elif args[0] == "changes":
                got = cli("changes", "--run", args[1], "--json").stdout
            elif args[0] == "asof":
                got = cli("asof", args[1], args[2], "--valid", args[3], "--json").stdout
            else:
                got = cli(*args, "--json").stdout
            assert got == answer, name
        _alembic(url, "0010", down=True)
        assert _contents(url) == before
