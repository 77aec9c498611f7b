"""The `changes` SQL view shows attribute texts as canonical JSON to a person reading the
store with a plain client -- the `sqlite3` shell (Python's sqlite3 module where the shell
is not installed: no feedledger function registered either way) or psql's driver --
though the versions are stored compact (codebook tokens). Also for a store that already
had codebooks when migration 0012 came (they are decoded too). SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from feedledger.ledger import engine as eng
from feedledger.ledger.encoding import Decoder
from helpers import BACKENDS, Cli, backend_store, write_csv
from ledger.previous_release import load_previous_release

SRC = "parcels"
HEADER = ["id", "city", "owner", "note"]


def plain_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """`sql`'s rows as a plain client reads them: the `sqlite3` shell (or Python's
    sqlite3 module), or a psycopg connection."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        shell = shutil.which("sqlite3")
        if shell is not None:
            out = subprocess.run(
                [shell, "-json", "-readonly", path, sql],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
            return [tuple(r.values()) for r in json.loads(out or "[]")]
        import sqlite3

        with sqlite3.connect(path) as conn:
            return [tuple(r) for r in conn.execute(sql)]
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql)]


def expected_texts(url: str) -> dict[int, str | None]:
    """Every version's canonical text, decoded by feedledger itself."""
    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT version_id, fields_id, attributes FROM versions"))
            decode = Decoder(conn)
            return {int(r[0]): decode.text(r[1], r[2]) for r in rows.all()}
    finally:
        engine.dispose()


def stored_texts(url: str) -> list[str]:
    engine = eng.make_engine(url)
    try:
        with engine.connect() as conn:
            got = conn.execute(sa.text("SELECT attributes FROM versions")).scalars().all()
            return [str(t) for t in got if t is not None]
    finally:
        engine.dispose()


def check_view(url: str) -> int:
    """The view's before/after equal feedledger's decoding, row by row; returns how
    many rows it has."""
    texts = expected_texts(url)
    prev = {
        int(v): (None if p is None else int(p))
        for v, p in plain_rows(url, "SELECT version_id, prev_version_id FROM versions")
    }
    rows = plain_rows(url, "SELECT version_id, change, before, after FROM changes")
    assert rows
    for version_id, _change, before, after in rows:
        vid = int(version_id)
        assert after == texts[vid], (vid, after, texts[vid])
        p = prev[vid]
        assert before == (None if p is None else texts[p]), (vid, before)
        for text in (before, after):
            if text is not None:
                assert json.loads(text) is not None
                assert not any(ord(c) < 0x20 for c in text), text
    return len(rows)


def test_the_changes_view_reads_as_canonical_json_from_a_plain_client(
    cli: Cli, tmp_path: Path
) -> None:
    cli("source", "add", SRC, "--key", "id")
    cities = ["SPRINGFIELD", "SPRINGFIELD", "SHELBYVILLE", "CAPITAL CITY"]
    notes = ["", "caf\u00e9, {x}", "caf\u00e9, {x}"]
    first = [[str(i), cities[i % 4], f'Owner "{i}"', notes[i % 3]] for i in range(40)]
    second = [r[:] for r in first[:-2]]  # two deleted
    for r in second[:5]:
        r[1] = "SHELBYVILLE"  # changed to a frequent value
    second.append(["new", "SPRINGFIELD", "tab\there", "back\\slash"])
    for day, rows in (("2026-08-01", first), ("2026-08-02", second)):
        path = write_csv(tmp_path / f"{SRC}_{day}.csv", HEADER, rows)
        cli("ingest", SRC, str(path), "--published-at", day)
    url = cli.ws.store_url
    # the texts really are stored compact, with two-byte value tokens too
    stored = stored_texts(url)
    assert all(any(ord(c) < 0x20 for c in s) for s in stored)
    assert any(any(0x1D <= ord(c) <= 0x1F for c in s) for s in stored)
    n = check_view(url)
    assert n == 40 + 4 + 2 + 1  # row 2 was SHELBYVILLE already
    changes = dict(
        ((json.loads(k)[0], c), a)
        for k, c, a in plain_rows(url, "SELECT key, change, after FROM changes")
    )
    assert json.loads(changes[("new", "added")]) == {
        "city": "SPRINGFIELD",
        "id": "new",
        "note": "back\\slash",
        "owner": "tab\there",
    }
    assert changes[("38", "deleted")] is None
    if not url.startswith("sqlite"):  # a psql session on another search path: the same
        base, _, options = url.partition("?options=-csearch_path%3D")
        sql = f"SELECT version_id, after FROM {options}.changes"
        assert dict(plain_rows(base, sql)) == dict(plain_rows(url, sql))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_with_codebooks_before_the_migration_reads_decoded(
    backend: str, tmp_path: Path
) -> None:
    """A store of the previous release (0009), upgraded to head: 0011 made codebooks
    with value segments; 0012 fills their tokens, and the view decodes every row."""
    with backend_store(backend, tmp_path) as url:
        load_previous_release(url)
        engine = eng.make_engine(url)
        try:
            eng.upgrade(engine)
        finally:
            engine.dispose()
        assert any(any(0x1D <= ord(c) <= 0x1F for c in s) for s in stored_texts(url))
        assert check_view(url) > 0
