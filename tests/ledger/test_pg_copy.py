"""ledger/readers/pg_copy.py (the snapshot's fast path, PostgreSQL): a query's rows read by COPY
binary through the ADBC driver are exactly what the psycopg path
(`arrow_fetch._dbapi`) and psycopg's own rows give -- texts with quotes, commas,
newlines, carriage returns, backslashes, control characters 1-31, any unicode, empty
texts and nulls, ints at both ends of int8 and int4, bools -- and the `:name` values
are bound as literals, whatever they hold. A reader that stops early ends the
statement on the server and leaves the store usable; an empty result gives no batch;
a batch size of 1 gives one row a batch. PostgreSQL only (the `store_url` fixture
restricted to it)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import feedledger as fl
from feedledger.config import Workspace
from feedledger.ledger.readers import arrow_fetch, pg_copy
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import key_ordered_sql, visible_sql
from helpers import migrate, write_csv

pytestmark = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)

SCHEMA = pa.schema(
    [
        ("k", pa.string()),
        ("big", pa.int64()),
        ("small", pa.int64()),  # an int4 column: cast
        ("flag", pa.bool_()),
        ("txt_nn", pa.string()),
        ("txt", pa.string()),
    ]
)
QUERY = (
    "SELECT k, big, small, flag, COALESCE(txt, '') AS txt_nn, txt FROM pgc"
    " WHERE id >= :lo AND k <> :skip AND (:flag::bool IS NULL OR flag = :flag::bool)"
    " ORDER BY id"
)

NASTY = ['"', "'", ",", "\n", "\r", "\r\n", "\\", "\\.", "\t", "{", "}", ":x", "é", "😀", "\u2028"]
NASTY += [chr(c) for c in range(1, 32)]
TEXTS = st.lists(
    st.one_of(st.sampled_from(NASTY), st.characters(min_codepoint=1, exclude_categories=("Cs",))),
    max_size=24,
).map("".join)
ROWS = st.lists(
    st.tuples(
        TEXTS,
        st.integers(-(2**63), 2**63 - 1),
        st.none() | st.integers(-(2**31), 2**31 - 1),
        st.booleans(),
        st.none() | TEXTS,
    ),
    max_size=40,
)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE pgc (id int8 PRIMARY KEY, k text NOT NULL, big int8,"
            " small int4, flag bool NOT NULL, txt text)"
        )
    st_ = Store(store_url, check=False)
    try:
        yield st_
    finally:
        st_.close()


def _fill(url: str, rows: list[tuple[Any, ...]]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE pgc")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgc VALUES (%s, %s, %s, %s, %s, %s)",
                [(i, *r) for i, r in enumerate(rows)],
            )


def _psycopg_rows(url: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    values: list[Any] = []

    def mark(found: re.Match[str]) -> str:
        values.append(params[found.group(1)])
        return "%s"

    query = re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", mark, QUERY)
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(query, values).fetchall()]


def _rows(got: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    table = pa.Table.from_batches(got, schema=SCHEMA)
    return [tuple(r.values()) for r in table.to_pylist()]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=ROWS,
    lo=st.integers(-2, 45),
    skip=TEXTS,
    flag=st.none() | st.booleans(),
    batch=st.integers(1, 50),
)
def test_rows_equal_the_psycopg_path(
    store: Store,
    store_url: str,
    rows: list[tuple[Any, ...]],
    lo: int,
    skip: str,
    flag: bool | None,
    batch: int,
) -> None:
    _fill(store_url, rows)
    params = {"lo": lo, "skip": skip, "flag": flag}
    got = list(pg_copy.batches(store, QUERY, params, SCHEMA, batch))
    want = list(arrow_fetch._dbapi(store, QUERY, params, SCHEMA, batch))
    assert all(b.schema.equals(SCHEMA, check_metadata=True) for b in got)
    assert all(0 < b.num_rows <= batch for b in got)
    assert _rows(got) == _rows(want) == _psycopg_rows(store_url, params)


def test_a_value_is_bound_as_a_literal(store: Store, store_url: str) -> None:
    _fill(store_url, [("a", 1, 1, True, None), ("b'; DROP TABLE pgc; --", 2, 2, False, "x")])
    params = {"lo": 0, "skip": "a' OR ''='", "flag": None}
    got = _rows(list(pg_copy.batches(store, QUERY, params, SCHEMA, 10)))
    assert [r[0] for r in got] == ["a", "b'; DROP TABLE pgc; --"]
    params = {"lo": 0, "skip": "b'; DROP TABLE pgc; --", "flag": None}
    assert [r[0] for r in _rows(list(pg_copy.batches(store, QUERY, params, SCHEMA, 10)))] == ["a"]


def test_an_empty_result_gives_no_batch(store: Store, store_url: str) -> None:
    _fill(store_url, [("a", 1, 1, True, "t")])
    params = {"lo": 5, "skip": "", "flag": None}
    assert list(pg_copy.batches(store, QUERY, params, SCHEMA, 10)) == []
    assert list(arrow_fetch._dbapi(store, QUERY, params, SCHEMA, 10)) == []


def test_a_batch_of_one_row(store: Store, store_url: str) -> None:
    rows = [(f"k{i}", i, i, i % 2 == 0, f"t\n{i}") for i in range(7)]
    _fill(store_url, rows)
    params = {"lo": 0, "skip": "", "flag": None}
    got = list(pg_copy.batches(store, QUERY, params, SCHEMA, 1))
    assert [b.num_rows for b in got] == [1] * 7
    assert _rows(got) == [(k, b, s, f, t, t) for k, b, s, f, t in rows]


def test_a_reader_that_stops_early_ends_the_statement(store: Store, store_url: str) -> None:
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgc SELECT g, 'k' || g, g, g % 1000, g % 2 = 0, repeat('x', 200)"
            " FROM generate_series(1, 300000) g"
        )
    mark = f"pg_copy_stop_{uuid.uuid4().hex}"
    query = f"/* {mark} */ " + QUERY
    params = {"lo": 0, "skip": "", "flag": None}
    reader = pg_copy.batches(store, query, params, SCHEMA, 1000)
    first = next(reader)
    assert first.num_rows == 1000 and first.column(0)[0].as_py() == "k1"
    # ~70 MB of rows: the COPY is still under way (the server waits on its client)
    assert _running(store_url, mark) == 1
    reader.close()
    # the server ends the COPY once it sees its client gone (a hang deadline, not a
    # timing: the backend may take a moment to notice)
    deadline = time.monotonic() + 120
    while _running(store_url, mark):
        assert time.monotonic() < deadline, "the early-stopped COPY still runs"
        time.sleep(0.1)
    # the store's own connections are untouched, and a whole read still works (many
    # of the driver's batches, each sliced: every row once, in order)
    whole = list(pg_copy.batches(store, QUERY, params, SCHEMA, 4096))
    assert all(0 < b.num_rows <= 4096 for b in whole)
    keys = pa.Table.from_batches(whole).column("k").to_pylist()
    assert keys == [f"k{g}" for g in range(1, 300001)]
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM pgc").scalar_one() == 300000


def _running(url: str, mark: str) -> int:
    """How many server backends run a statement holding `mark`."""
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE query LIKE %s AND state = 'active' AND pid <> pg_backend_pid()",
            (f"%{mark}%",),
        ).fetchone()
    return int(got[0]) if got else 0


def test_a_ledger_scan_equals_the_psycopg_path(store_url: str, tmp_path: Path) -> None:
    """The snapshot's own scan of a real ledger (stored attribute texts with codebook
    tokens, control characters and all), latest belief and as known at a time."""
    ws = Workspace.create(tmp_path / "ws", store_url=store_url, archive=None)
    migrate(ws.store_url)
    texts = ['a "quoted", text', "line\nbreak\r\n", "back\\slash\\.", "\x01\x02\x1f", "", "é😀"]
    with fl.open(ws.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        for day in (1, 2, 3):
            rows = [[str(i), texts[(i + day) % len(texts)], str(i * day)] for i in range(300)]
            if day == 3:
                rows = rows[:250]  # 50 deleted
            path = write_csv(tmp_path / f"d{day}.csv", ["id", "note", "n"], rows)
            src.ingest(path, published_at=f"2026-08-0{day}")
        store = led.context.store
        scan = pa.schema(
            [
                ("key", pa.string()),
                ("valid_from", pa.int64()),
                ("txn_seq", pa.int64()),
                ("deleted", pa.bool_()),
                ("attributes", pa.string()),
                ("fields_id", pa.int64()),
            ]
        )
        cols = [*scan.names[:4], "COALESCE(attributes, '') AS attributes", "fields_id"]
        for known in (None, 0, 2**62):
            vis = visible_sql(":known" if known is not None else None)
            sql = key_ordered_sql(cols, f"source = :source AND valid_from <= :valid AND {vis}")
            params: dict[str, Any] = {"source": "s", "valid": 2**62, "known": known}
            got = pa.Table.from_batches(list(pg_copy.batches(store, sql, params, scan, 64)), scan)
            want = pa.Table.from_batches(
                list(arrow_fetch._dbapi(store, sql, params, scan, 64)), scan
            )
            assert got.equals(want)
            assert got.num_rows == (0 if known == 0 else 300 * 2 + 250 + 50)


@pytest.mark.parametrize("threshold", [0, 1 << 60], ids=["big-store", "small-store"])
def test_arrow_fetch_reads_by_copy_only_from_a_big_versions_table(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: int
) -> None:
    """COPY's ~75 ms set-up is paid only where the versions table is big
    (`arrow_fetch.COPY_FROM_BYTES`); either way the batches are the same."""
    ws = Workspace.create(tmp_path / "ws", store_url=store_url, archive=None)
    migrate(ws.store_url)
    with fl.open(ws.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        rows = [[str(i), f"n{i}"] for i in range(50)]
        src.ingest(write_csv(tmp_path / "d1.csv", ["id", "note"], rows), published_at="2026-08-01")
        store = led.context.store
        used: list[str] = []
        real = pg_copy.batches

        def spy(*args: Any) -> Any:
            used.append("copy")
            return real(*args)

        monkeypatch.setattr(pg_copy, "batches", spy)
        monkeypatch.setattr(arrow_fetch, "COPY_FROM_BYTES", threshold)
        scan = pa.schema([("key", pa.string()), ("valid_from", pa.int64())])
        sql = "SELECT key, valid_from FROM versions WHERE source = :source ORDER BY key"
        got = pa.Table.from_batches(
            list(arrow_fetch.batches(store, sql, {"source": "s"}, scan, batch=16)), scan
        )
        assert used == (["copy"] if threshold == 0 else [])
        assert sorted(got.column("key").to_pylist()) == sorted(f'["{i}"]' for i in range(50))
