"""The snapshot's fast path (an index-ordered scan kept in Arrow,
attributes decoded column-wise, CSV/Parquet written a batch at a time) gives exactly
what the former row-by-row path gave -- the ROW_NUMBER() "latest per key" query, one
`json.loads` and one `csv.writer` row per entity -- over random histories with
deletes, retractions, re-statements at one valid time, schema changes and known-at
times, on SQLite and PostgreSQL; and the `--format parquet` export."""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from example_budget import examples
from feedledger.formats.canonical import RawNumber, canonical
from feedledger.ledger.encoding.columns import text_columns
from feedledger.ledger.readers import snapshot_rows
from feedledger.ledger.schema import CHANGE_CODES, versions
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import latest_per_key_sql, visible_sql
from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports import writers as snapshot_writers
from helpers import Cli, migrate, old_cell, old_csv, refused_or, write_csv

_names = itertools.count()

TEXTS = st.text(
    alphabet=st.sampled_from(["a", "Z", " ", ",", '"', "'", "\n", "\r", "\\", "é", "\t", ":", "{"]),
    max_size=6,
)
NUMBERS = st.sampled_from(["0", "-1", "2.50", "1e5", "1E-3", "12345678901234567890"])
VALUES = st.one_of(
    TEXTS,
    st.none(),
    NUMBERS.map(RawNumber),
    st.booleans(),
    st.lists(st.one_of(NUMBERS.map(RawNumber), TEXTS), max_size=2),
)
FIELDS = ["b", "a", "c d", "é"]
RECORD = st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1)
VERSION = st.tuples(
    st.sampled_from(["k1", "k2", "k3", "k10", "é"]),  # key
    st.integers(1, 4),  # valid_from (day)
    st.booleans(),  # deleted
    st.one_of(st.none(), st.integers(0, 6)),  # retracted this many commits later
    RECORD,
)


def _store(url: str) -> Store:
    migrate(url)
    return Store(url)


def _load(store: Store, source: str, history: list[tuple[Any, ...]]) -> list[int]:
    """Insert `history` as versions (commit i at recorded_at 10*i); the instants at
    which visibility changes, either side."""
    rows = []
    base = 1_000 * next(_names)
    for i, (key, day, deleted, retracted, record) in enumerate(history):
        rows.append(
            {
                "version_id": base + i,
                "source": source,
                "key": json.dumps([key], ensure_ascii=False),
                "valid_from": day,
                "recorded_at": 10 * i + 10,
                "txn_seq": i + 1,
                "retracted_at": None if retracted is None else 10 * (i + retracted) + 15,
                "run_id": "r",
                "payload_id": f"p{day}",
                "backfill": False,
                "deleted": deleted,
                "change": CHANGE_CODES["deleted" if deleted else "changed"],
                "content_hash": 0,
                "attributes": None if deleted else canonical(record),
            }
        )
    if rows:
        with store.begin() as conn:
            conn.execute(versions.insert(), rows)
    times = {t for r in rows for t in (r["recorded_at"], r["retracted_at"]) if t is not None}
    return sorted({t + d for t in times for d in (-1, 0, 1)})


def _reference(store: Store, source: str, valid: int, known: int | None) -> list[tuple[str, str]]:
    """The former query: ROW_NUMBER() latest per key, present ones, in key order."""
    vis = visible_sql(":known" if known is not None else None)
    latest = latest_per_key_sql(
        ["key", "deleted", "attributes"], f"source = :source AND valid_from <= :valid AND {vis}"
    )
    sql = f"SELECT key, attributes FROM ({latest}) p WHERE NOT deleted ORDER BY key"
    with store.engine.connect() as conn:
        got = conn.execute(text(sql), {"source": source, "valid": valid, "known": known})
        return [(r[0], r[1]) for r in got]


_stores: dict[str, Store] = {}


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(VERSION, max_size=14),
    batch=st.integers(1, 5),
    order=st.permutations(FIELDS),
)
def test_batches_equal_the_row_by_row_snapshot(
    store_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    history: list[Any],
    batch: int,
    order: list[str],
) -> None:
    """(store_url: one store per backend, migrated once; each example its own source)"""
    if store_url not in _stores:
        _stores[store_url] = _store(store_url)
        request.addfinalizer(lambda: _stores.pop(store_url).engine.dispose())
    _check(_stores[store_url], f"s{next(_names)}", history, batch, order, tmp_path)


def _check(
    store: Store, source: str, history: list[Any], batch: int, order: list[str], tmp: Path
) -> None:
    instants = _load(store, source, history)
    for valid in (1, 2, 4):
        for known in [None, *instants[:: max(1, len(instants) // 3)]]:
            want = _reference(store, source, valid, known)
            got = list(snapshot_rows.rows(store, source, valid, known, batch=batch))
            assert [(k, a) for k, a, _g in got] == want, (valid, known)

            def fast(valid: int = valid, known: int | None = known) -> bytes:
                out = io.BytesIO()
                found = snapshot_rows.batches(store, source, valid, known, batch=batch)
                snapshot_writers.write_csv(found, out, order)
                return out.getvalue()

            def slow(want: list[tuple[str, str]] = want) -> bytes:
                return old_csv([a for _k, a in want], order)

            assert refused_or(fast) == refused_or(slow)
            _check_parquet(store, source, valid, known, batch, order, want, tmp)


def _check_parquet(
    store: Store,
    source: str,
    valid: int,
    known: int | None,
    batch: int,
    order: list[str],
    want: list[tuple[str, str]],
    tmp: Path,
) -> None:
    target = tmp / "s.parquet"
    found = snapshot_rows.batches(store, source, valid, known, batch=batch)
    try:
        snapshot_writers.write_parquet(found, target, order)
    except ConfigError:
        return  # (the CSV check above saw the same refusal)
    table = pq.read_table(target)
    if not want:
        assert table.num_rows == 0
        return
    records = [json.loads(a, parse_float=RawNumber, parse_int=RawNumber) for _k, a in want]
    for name in table.column_names:
        cells = [r.get(name) for r in records]
        expected = [None if v is None else old_cell(v) for v in cells]
        assert table.column(name).to_pylist() == expected, name


@given(records=st.lists(RECORD, min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_text_columns_equal_json_loads(records: list[dict[str, Any]]) -> None:
    names = sorted({n for r in records for n in r})
    texts = [canonical(r) for r in records]
    got = [c.to_pylist() for c in text_columns(pa.array(texts, pa.string()), names)]
    for name, col in zip(names, got, strict=True):
        expected = [None if r.get(name) is None else old_cell(r.get(name)) for r in records]
        assert col == expected, name


def test_the_scan_needs_no_sort_on_sqlite(tmp_path: Path) -> None:
    """The snapshot reads the versions in the index's order: SQLite's plan has no
    temporary B-tree (no sort of the whole source, no window over it)."""
    from feedledger.ledger.visibility import key_ordered_sql

    store = _store(f"sqlite:///{tmp_path / 'plan.db'}")
    sql = key_ordered_sql(
        ["key", "valid_from", "txn_seq", "deleted", "attributes"],
        f"source = 's' AND valid_from <= 5 AND {visible_sql('7')}",
    )
    with store.engine.connect() as conn:
        plan = " | ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    store.engine.dispose()
    assert "ix_versions_source_key" in plan and "TEMP B-TREE" not in plan, plan


def test_parquet_export(cli: Cli, tmp_path: Path) -> None:
    """`snapshot --format parquet -o FILE`: the CSV's columns and cells as strings,
    null where a field is null; refused to stdout."""
    cli("source", "add", "p", "--key", "id", "--timezone", "UTC")
    day1 = write_csv(
        tmp_path / "p1.csv",
        ["id", "zoning", "note"],
        [["1", "R-1", 'a, "quoted"'], ["2", "MU", ""], ["3", "A", "x"]],
    )
    cli("ingest", "p", str(day1), "--published-at", "2026-08-01")
    day2 = write_csv(
        tmp_path / "p2.csv", ["id", "zoning", "note"], [["1", "R-2", "b"], ["3", "A", "x"]]
    )
    cli("ingest", "p", str(day2), "--published-at", "2026-08-02")
    out = tmp_path / "snap.parquet"
    cli("snapshot", "p", "--valid", "2026-08-01", "--format", "parquet", "-o", str(out))
    table = pq.read_table(out)
    assert table.column_names == ["id", "zoning", "note"]
    assert table.to_pylist() == [
        {"id": "1", "zoning": "R-1", "note": 'a, "quoted"'},
        {"id": "2", "zoning": "MU", "note": ""},
        {"id": "3", "zoning": "A", "note": "x"},
    ]
    csv_out = tmp_path / "snap.csv"
    cli("snapshot", "p", "--valid", "2026-08-02", "-o", str(csv_out))
    cli("snapshot", "p", "--valid", "2026-08-02", "--format", "parquet", "-o", str(out))
    with csv_out.open(newline="") as fh:
        assert list(csv.DictReader(fh)) == pq.read_table(out).to_pylist()
    refused = cli("snapshot", "p", "--valid", "2026-08-02", "--format", "parquet", expect=2)
    assert "writes a file, not stdout" in refused.stderr
    # row-group statistics for the key (the rows' order, what a reader can skip by)
    # only: another column's min/max would skip no row group
    meta = pq.ParquetFile(out).metadata
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    ids = [g.column(0) for g in groups]
    assert all(c.path_in_schema == "id" and c.is_stats_set for c in ids)
    assert min(c.statistics.min for c in ids) == "1" and max(c.statistics.max for c in ids) == "3"
    assert not any(g.column(i).is_stats_set for g in groups for i in (1, 2))


def test_the_compiled_loops_load_beside_the_fetch_once_per_process(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`snapshot_writers.loading`: a thread loading the format's compiled loops while the
    export starts its fetch, joined before the export returns; once per process; none
    for JSON lines; a failure there is only a lost head start (the export still
    writes every row, and the next export tries again)."""
    import threading

    monkeypatch.setattr(snapshot_writers, "_LOADED", set())
    assert snapshot_writers.loading("jsonl") is None
    started: list[threading.Thread] = []
    real = snapshot_writers.loading

    def recording(fmt: str) -> threading.Thread | None:
        thread = real(fmt)
        if thread is not None:
            started.append(thread)
        return thread

    monkeypatch.setattr(snapshot_writers, "loading", recording)
    cli("source", "add", "p", "--key", "id", "--timezone", "UTC")
    day1 = write_csv(tmp_path / "p1.csv", ["id", "zoning"], [["1", "R-1"], ["2", "MU"]])
    cli("ingest", "p", str(day1), "--published-at", "2026-08-01")
    out = tmp_path / "snap.parquet"

    def broken() -> Any:
        raise RuntimeError("no sample")

    with monkeypatch.context() as patch:
        patch.setattr(snapshot_writers, "_sample", broken)
        cli("snapshot", "p", "--valid", "2026-08-01", "--format", "parquet", "-o", str(out))
    assert pq.read_table(out).num_rows == 2
    assert len(started) == 1 and not started[0].is_alive()
    assert "parquet" not in snapshot_writers._LOADED  # failed: tried again next time
    cli("snapshot", "p", "--valid", "2026-08-01", "--format", "parquet", "-o", str(out))
    assert len(started) == 2 and not started[1].is_alive()
    assert sorted(snapshot_writers._LOADED) == ["parquet"]
    cli("snapshot", "p", "--valid", "2026-08-01", "--format", "parquet", "-o", str(out))
    assert len(started) == 2  # loaded: no thread
    csv_out = tmp_path / "snap.csv"
    cli("snapshot", "p", "--valid", "2026-08-01", "-o", str(csv_out))
    assert len(started) == 3 and not started[2].is_alive()
    assert csv_out.read_text().splitlines() == ["id,zoning", "1,R-1", "2,MU"]
