"""Compact versions: attribute texts stored against per-source codebooks
(ledger/encoding/codec.py, ledger/encoding/codebooks.py) decode to exactly the canonical JSON they
were; queries answer the same JSON as the previous release; migration 0010 converts a
store the previous release populated, on both backends."""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from example_budget import examples
from feedledger.config import Workspace
from feedledger.ledger import engine as eng
from feedledger.ledger.encoding import codebooks
from feedledger.ledger.encoding.codec import TOKENS, Codebook, covers, gains, plan, row_patterns
from helpers import BACKENDS, Cli, backend_store, migrate, write_csv
from ledger.previous_release import FIXTURE, canonical, load_previous_release

MIGRATION: Any = importlib.import_module(
    "feedledger.ledger.migrations.versions.0010_compact_versions"
)


# -- the codec ----------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_names = st.sampled_from(["a", "ab", "b", "zone", "owner", 'q"t', "x\\y", "\u00e9", "c\nd", "id"])
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), _text, st.floats(allow_nan=False)
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_names | _text, inner, max_size=3)
    ),
    max_leaves=6,
)
_records = st.lists(st.dictionaries(_names, _value, max_size=8), min_size=1, max_size=20)


@settings(max_examples=examples(80), deadline=None)
@given(records=_records, planned_from=_records)
def test_any_text_decodes_to_itself_whatever_codebook(
    records: list[dict[str, Any]], planned_from: list[dict[str, Any]]
) -> None:
    texts = [canonical(r) for r in records]
    for sample in (texts, [canonical(r) for r in planned_from]):
        book = Codebook(plan(gains(sample)))
        stored = book.encode_series(pl.Series([*texts, None], dtype=pl.String))
        assert book.decode_series(stored).to_list() == [*texts, None]
        assert [book.decode(s) for s in stored.to_list()[:-1]] == texts
        assert not any(t in text for t in TOKENS for text in texts)  # never raw in JSON
        # the migration's SQL `replace` (one pattern after the other) decodes the same
        inner = "SELECT 0 AS k, ? AS a"
        select, params = MIGRATION._replacing(
            inner, ["k"], list(zip(book.patterns, book.tokens, strict=True))
        )
        with sqlite3.connect(":memory:") as conn:
            for text in texts:
                (sql_stored,) = conn.execute(
                    f"SELECT a FROM ({select.replace('?', ':t')})", {"t": text, **params}
                ).fetchone()
                assert book.decode(sql_stored) == text


def test_a_csv_codebook_takes_names_and_quotes() -> None:
    text = canonical({"acres": "0.760", "owner": "PATEL, JOSHUA", "zip": "62710"})
    assert row_patterns(text) == ['{"acres":"', '","owner":"', '","zip":"', '"}']
    book = Codebook(plan(gains([text])))
    stored = book.encode_series(pl.Series([text])).to_list()[0]
    assert len(stored) == len("0.760PATEL, JOSHUA62710") + 4
    assert covers(book, gains([text])) and not covers(Codebook([]), gains([text]))


# -- the same JSON as before, and the store is smaller ------------------------------------


_PER_STORE = re.compile(r'"(recorded_at|retracted_at|run_id)": "[^"]*"')


def _queries(cli: Cli, source: str, keys: list[str], days: list[str]) -> dict[str, str]:
    """Every answer's text, less what differs from store to store (run ids and
    transaction times)."""

    def text(*args: str) -> str:
        done = cli(*args, expect=None)
        return _PER_STORE.sub(r'"\1": "-"', f"{done.exit_code} {done.stdout} {done.stderr}")

    out: dict[str, str] = {}
    for key in keys:
        out[f"history {key}"] = text("history", source, key, "--all", "--json")
        for day in days:
            out[f"asof {key} {day}"] = text("asof", source, key, "--valid", day, "--json")
    for day in days:
        out[f"snapshot {day}"] = text("snapshot", source, "--valid", day, "--format", "jsonl")
    for i, run in enumerate(cli.json("runs", source)):
        out[f"changes {i}"] = text("changes", "--run", run["run_id"], "--json")
    return out


_cell = st.sampled_from(["", "x", "1.10", 'a "q"', "SMITH, JO", "\u00e9\u4e2d", "b\\s", "7"])
_day = st.tuples(
    st.sampled_from([["k", "a", "b"], ["k", "b", "c"], ["k", "a"]]),  # schema changes
    st.dictionaries(st.sampled_from(["1", "2", "3", "4"]), st.lists(_cell, min_size=2, max_size=2)),
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=examples(4),
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a store pair per example: no shrinking
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(days=st.lists(_day, min_size=1, max_size=4), retract=st.integers(0, 4))
def test_compact_versions_answer_the_json_of_canonical_ones(
    backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    days: list[tuple[list[str], dict[str, list[str]]]],
    retract: int,
) -> None:
    """The same payloads (schema changes, deletes, re-publications of a day, a retraction)
    into a store writing compact texts and one writing them canonical (no codebook):
    every history/asof/snapshot/changes answer is the same text."""
    answers = []
    for compact in (True, False):
        tmp = tmp_path_factory.mktemp("s")
        with backend_store(backend, tmp) as url, pytest.MonkeyPatch.context() as mp:
            if not compact:
                mp.setattr(codebooks, "choose", lambda *_a: (None, Codebook([])))
            ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
            cli = Cli(ws)
            migrate(ws.store_url)
            cli("source", "add", "s", "--key", "k", "--format", "csv", "--kind", "snapshot",
                "--mass-delete-threshold", "1")  # fmt: skip
            dates = []
            for i, (header, rows) in enumerate(days + days[:1]):  # day 1 re-published
                date = f"2026-08-{i + 1:02d}"
                body = [[k, *cells][: len(header)] for k, cells in sorted(rows.items())]
                path = write_csv(tmp / f"d{i}.csv", header, body)
                cli("ingest", "s", str(path), "--published-at", date)
                dates.append(date)
            runs = [r["run_id"] for r in cli.json("runs", "s")]
            if retract < len(runs):
                cli("retract", runs[retract], expect=None)
            answers.append(_queries(cli, "s", ["1", "2", "3", "4"], dates))
    assert answers[0] == answers[1]


# -- migration 0010 over a store the previous release populated ---------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_converts_a_previous_release_store(backend: str, tmp_path: Path) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    with backend_store(backend, tmp_path) as url:
        load_previous_release(url)
        root = tmp_path / "ws"
        root.mkdir()
        toml = (FIXTURE / "feedledger.toml").read_text(encoding="utf-8")
        toml = toml.replace('url = "sqlite:///.feedledger/ledger.db"', f"url = {json.dumps(url)}")
        (root / "feedledger.toml").write_text(toml, encoding="utf-8")
        cli = Cli(Workspace.load(root / "feedledger.toml"))
        assert f"0009 -> {eng.HEAD}" in cli("db", "upgrade").stdout  # 0010, 0011, ... head
        got: dict[str, str] = {}
        for name in expected["queries"]:
            args = name.split(" ")
            if args[0] == "snapshot":
                got[name] = cli("snapshot", args[1], "--valid", args[2], "--format", args[3]).stdout
            elif args[0] == "changes":
                got[name] = cli("changes", "--run", args[1], "--json").stdout
            elif args[0] == "asof":
                got[name] = cli("asof", args[1], args[2], "--valid", args[3], "--json").stdout
            else:
                got[name] = cli(*args, "--json").stdout
        assert got == expected["queries"]
        engine = eng.make_engine(url)
        try:
            with engine.connect() as conn:
                compacted = conn.execute(
                    sa.text("SELECT count(*) FROM versions WHERE fields_id IS NOT NULL")
                ).scalar_one()
                books = Counter(
                    r[0] for r in conn.execute(sa.text("SELECT source FROM field_lists"))
                )
        finally:
            engine.dispose()
        # 0010's codebook per source, and 0011's with values where values repeat
        assert compacted > 0 and set(books) == {"parcels", "items"}
        # the converted store takes new payloads (a schema change: a new codebook)
        path = write_csv(tmp_path / "p5.csv", ["parcel_id", "owner", "use"], [["P1", "A", "B"]])
        cli("ingest", "parcels", str(path), "--published-at", "2026-08-05")
        latest = cli.json("history", "parcels", "P1")[-1]
        assert latest["attributes"] == {"owner": "A", "parcel_id": "P1", "use": "B"}
